"""Activation: RELU, RELUX (relu6 / clip at max_limit), CLIP, LEAKYRELU, PRELU,
SIGMOID, TANH, ELU, HARDSIGMOID, HARDSWISH, GELU, SOFTPLUS, SOFTSIGN, SELU, MISH,
SWISH (x * sigmoid(alpha x)), CELU, THRESHOLDEDRELU, SHRINK (alpha: bias, beta: lambd).

Args: activation, activation_coefficient (leaky slope / elu alpha / hardsigmoid
slope / clip min), max_limit (relux max / hardsigmoid offset / clip max).
PRELU takes the slope as a second input, broadcast against x.
"""
import math

import numpy as np

from mace.ops._common import apply_activation, broadcast_shape, swish
from mace.ops.eltwise import _np_erf
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op


@register_op("Activation", layout=Layout.ELEMENTWISE)
class Activation(OpSpec):
    attrs = {**FUSED_ACTIVATION, "beta": 0.0}

    @staticmethod
    def infer(ctx):
        return [(broadcast_shape(*ctx.shapes), ctx.dtypes[0])]


def extra_activation(kind, x, alpha, beta):
    """Activations apply_activation lacks (SWISH: both, as a conv may have it fused)."""
    if kind == "GELU":
        return 0.5 * x * (1.0 + _np_erf(x / np.sqrt(2.0)))
    if kind == "GELU_TANH":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    if kind == "SOFTPLUS":
        return np.logaddexp(0, x)
    if kind == "SOFTSIGN":
        return x / (1 + np.abs(x))
    if kind == "SELU":
        return beta * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))
    if kind == "MISH":
        return x * np.tanh(np.logaddexp(0, x))
    if kind == "SWISH":  # x * sigmoid(alpha x)
        return swish(x, alpha)
    if kind == "CELU":
        return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))
    if kind == "THRESHOLDEDRELU":
        return np.where(x > alpha, x, 0)
    if kind == "SHRINK":
        return np.where(x < -beta, x + alpha, np.where(x > beta, x - alpha, 0))
    return None


def _int_clip_bounds(kind, lo, hi, dtype):
    """Integer (lo, hi) for CLIP / RELUX on integer tensors (ONNX Clip takes ints), else None.

    The float bounds would make numpy compute in float and refuse to cast back.
    """
    if np.dtype(dtype).kind not in "iu" or kind not in ("CLIP", "RELUX"):
        return None
    info = np.iinfo(dtype)
    lo = 0 if kind == "RELUX" else lo
    return (np.array(max(math.ceil(lo), info.min), dtype),
            np.array(min(math.floor(hi), info.max), dtype))


@kernel("Activation", "cpu")
class ActivationCpu(Kernel):
    def setup(self, ctx):
        self.kind = ctx.arg("activation")
        self.alpha = ctx.arg("activation_coefficient")
        self.max_limit = ctx.arg("max_limit")
        self.beta = ctx.arg("beta")
        self.int_bounds = _int_clip_bounds(self.kind, self.alpha, self.max_limit,
                                           ctx.output_dtypes[0])

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        if self.int_bounds is not None:
            np.clip(x, *self.int_bounds, out=out)
            return
        # float16 computes in float32 and rounds once (a chain of half-precision steps drifts)
        wide = x.astype(np.float32) if x.dtype == np.float16 else x
        other = extra_activation(self.kind, wide, self.alpha, self.beta)
        if other is not None:
            np.copyto(out, other, casting="unsafe")
            return
        np.copyto(out, np.broadcast_to(x, out.shape))
        slope = inputs[1] if self.kind == "PRELU" else None
        apply_activation(out, self.kind, self.alpha, self.max_limit, slope)
