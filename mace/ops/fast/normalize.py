"""Normalize (SSD's L2 norm with a learned scale), fast CPU kernel: per position over the
channels (across_spatial 0, channels last: the NHWC layout) as one compiled float64 loop
(_normalize_loops.l2_rows), split across the compute pool. Within 1 ulp of the reference (its
float64 sum is pairwise). Declined (the reference runs): across_spatial, channels not last, a
scale that is not a constant of one value or one per channel, other dtypes, no numba.
"""
from __future__ import annotations

import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel


def _lib():
    return op_loops("_normalize_loops")


def channel_scale(ctx):
    shape, scale = tuple(ctx.input_shapes[0]), ctx.consts[1] if len(ctx.consts) > 1 else None
    if scale is None or not shape or np.size(scale) not in (1, shape[-1]):
        return None
    return np.ascontiguousarray(np.broadcast_to(np.asarray(scale, np.float64).reshape(-1), (shape[-1],)))


def per_position(ctx) -> str | None:
    shape = tuple(ctx.input_shapes[0])
    if _lib() is None:
        return NO_LOOPS
    if ctx.arg("across_spatial", 1):
        return "across_spatial (per position only)"
    if len(shape) < 2 or 0 in shape:
        return f"input shape {list(shape)} (rank >= 2, no empty axis)"
    if normalize_axis(ctx.arg("axis", 1), len(shape)) != len(shape) - 1:
        return f"axis {ctx.arg('axis', 1)} is not the last"
    return not_float32(ctx) or (
        None if channel_scale(ctx) is not None else "scale is not constant, one value or one per channel")


@kernel("Normalize", "cpu:fast")
class NormalizeFast(FastKernel):
    check = staticmethod(per_position)

    def setup(self, ctx):
        self.scale = channel_scale(ctx)
        self.eps = float(ctx.arg("eps", 1e-10))

    def bind(self, inputs, outputs, scratch=None):
        c = self.scale.shape[0]
        # arena tensors are contiguous: the reshapes are views the loop writes through
        x, out = inputs[0].reshape(-1, c), outputs[0].reshape(-1, c)
        return compute_of(self.ctx).loop("l2_rows", (x, self.scale, self.eps, out), x.shape[0], 2 * x.size, lib=_lib())
