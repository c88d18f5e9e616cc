"""Helpers shared by several op modules (shapes, padding, fused activations)."""
from __future__ import annotations

import math

import numpy as np

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


def broadcast_shape(*shapes) -> tuple:
    return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))


def to_nhwc_shape(shape, data_format: str) -> tuple:
    shape = tuple(shape)
    return tuple(shape[i] for i in NCHW_TO_NHWC) if data_format == "NCHW" else shape


def from_nhwc_shape(shape, data_format: str) -> tuple:
    shape = tuple(shape)
    return tuple(shape[i] for i in NHWC_TO_NCHW) if data_format == "NCHW" else shape


def resolve_pads(in_hw, kernel_hw, strides, dilations, pads=None, padding="") -> list:
    """Explicit [top, left, bottom, right] pads; SAME_UPPER/SAME_LOWER (TF "SAME") computed."""
    padding = (padding or "").upper()
    if padding in ("SAME", "SAME_UPPER", "SAME_LOWER"):
        result = [0, 0, 0, 0]
        for d in range(2):
            eff_k = (kernel_hw[d] - 1) * dilations[d] + 1
            out = math.ceil(in_hw[d] / strides[d])
            total = max((out - 1) * strides[d] + eff_k - in_hw[d], 0)
            small, big = total // 2, total - total // 2
            lo, hi = (big, small) if padding == "SAME_LOWER" else (small, big)
            result[d], result[d + 2] = lo, hi
        return result
    if padding == "VALID" or not pads:
        return [0, 0, 0, 0]
    return list(pads)


def conv_out_size(size, k, stride, dilation, pad_lo, pad_hi, ceil_mode=False) -> int:
    eff_k = (k - 1) * dilation + 1
    span = size + pad_lo + pad_hi - eff_k
    n = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (n - 1) * stride >= size + pad_lo:
        n -= 1  # the last window must start inside the input or its left pad
    return n


def apply_activation(x: np.ndarray, act: str, alpha: float = 0.0, max_limit: float = 0.0,
                     slope: np.ndarray | None = None) -> np.ndarray:
    """Apply a (fused) activation in place on `x` and return it."""
    if not act or act == "NOOP":
        return x
    if act in ("RELU", "RELUX", "CLIP") and x.dtype.kind == "f":
        # clip with bounds of x's own type: ~4x faster than maximum(x, 0) in numpy 2.4
        lo, hi = (0, np.inf) if act == "RELU" else (0 if act == "RELUX" else alpha, max_limit)
        np.clip(x, x.dtype.type(lo), x.dtype.type(hi), out=x)
    elif act == "RELU":
        np.maximum(x, 0, out=x)
    elif act == "RELUX":
        np.clip(x, 0, max_limit, out=x)
    elif act == "CLIP":  # min in alpha, max in max_limit
        np.clip(x, alpha, max_limit, out=x)
    elif act == "LEAKYRELU":
        np.maximum(x, x * alpha, out=x) if 0 <= alpha <= 1 else np.copyto(x, np.where(x >= 0, x, x * alpha))
    elif act == "PRELU":
        np.copyto(x, np.where(x >= 0, x, x * slope))
    elif act == "SIGMOID":
        np.copyto(x, _sigmoid(x))
    elif act == "TANH":
        np.tanh(x, out=x)
    elif act == "ELU":
        np.copyto(x, np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))))
    elif act == "HARDSIGMOID":
        np.clip(x * alpha + max_limit, 0, 1, out=x)  # alpha=slope, max_limit=offset
    elif act == "HARDSWISH":
        np.multiply(x, np.clip(x / 6.0 + 0.5, 0, 1), out=x)
    elif act == "SWISH":   # fused into a conv on CPU float models (fuse_activation)
        np.copyto(x, swish(x, alpha))
    else:
        raise ValueError(f"unknown activation '{act}'")
    return x


def swish(x: np.ndarray, alpha: float) -> np.ndarray:
    """x * sigmoid(alpha x), written so a large |x| never overflows exp."""
    return x * (0.5 * (1.0 + np.tanh(0.5 * alpha * x)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # Split by sign so exp never overflows.
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def activation_args(ctx) -> dict:
    """The fused-activation arguments of an op, as apply_activation keywords."""
    return {"act": ctx.arg("activation", ""), "alpha": ctx.arg("activation_coefficient", 0.0),
            "max_limit": ctx.arg("max_limit", 0.0)}


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def permute_axis(axis: int, perm, rank: int) -> int:
    """Stored position of logical `axis` for a tensor stored as logical.transpose(perm)."""
    return list(perm).index(normalize_axis(axis, rank))


def sequence(steps: list):
    """One zero-argument callable running `steps` in order."""
    if len(steps) == 1:
        return steps[0]
    steps = tuple(steps)

    def run():
        for step in steps:
            step()
    run.parts = steps   # the engine's program calls them one by one (mace/runtime/program.py)
    return run
