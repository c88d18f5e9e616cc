"""Eltwise on float32 tensors, fast CPU kernel: one compiled pass for a same-shape pair with
its clip, or for a unary function.

A residual Add with its fused ReLU is np.add then np.clip in the reference: two
passes, the second re-reading the sum. The compiled loop (_loops.binary_clip)
reads both inputs once and writes the clipped result once (ResNet-50's
56x56x256 adds: 0.21 -> 0.12 ms).

Unary ERF / SQRT / RSQRT / RECIPROCAL / NEG / ABS / SQUARE run _act_loops.unary / exact (as
the fast Activation): ERF was scipy's float64 erf (~8 ns an element quiet, a BERT export's
unfused GELU), the loop's is vectorized float64 (~2.7 ns; within 2 ulp of the reference), the
others the reference's float32 bytes in one pass (RSQRT was two). EXP and LOG stay numpy's
float32 ufuncs: one vectorized pass already, as fast as the float64 loop or faster.
Broadcasts, constants, other kinds, non-clip activations (a fused one after a unary op too)
and the no-numba case stay with the reference kernel.
"""
from __future__ import annotations

import numpy as np

from mace.ops import eltwise as _reference  # noqa: F401 - registers the op type first
from mace.ops._common import activation_args
from mace.ops.fast._act_codes import UNARY_CODES, aliasing
from mace.ops.fast._base import F32, FastKernel, clip_bounds
from mace.ops.fast._jit import act_loops, loops
from mace.ops.fast._pool import loop
from mace.ops.fast.activation import unary_step
from mace.ops.registry import kernel

CODES = {"SUM": 0, "SUB": 1, "PROD": 2, "MIN": 3, "MAX": 4}


def _float32(ctx) -> bool:
    return (all(np.dtype(d) == F32 for d in ctx.input_dtypes)
            and np.dtype(ctx.output_dtypes[0]) == F32)


def same_shape_pair(ctx) -> bool:
    shapes = ctx.input_shapes
    return (loops() is not None and ctx.arg("type") in CODES and len(shapes) == 2
            and shapes[0] == shapes[1] == tuple(ctx.output_shapes[0])
            and all(c is None for c in ctx.consts) and _float32(ctx)
            and clip_bounds(activation_args(ctx)) is not None)


def float_unary(ctx) -> bool:
    return (act_loops() is not None and ctx.arg("type") in UNARY_CODES
            and len(ctx.input_shapes) == 1 and ctx.consts[0] is None
            and tuple(ctx.input_shapes[0]) == tuple(ctx.output_shapes[0]) and _float32(ctx)
            and (activation_args(ctx)["act"] or "NOOP") == "NOOP")


@kernel("Eltwise", "cpu:fast")
class EltwiseFast(FastKernel):
    @staticmethod
    def accepts(ctx) -> bool:
        return same_shape_pair(ctx) or float_unary(ctx)

    def setup(self, ctx):
        self.unary = UNARY_CODES.get(ctx.arg("type")) if len(ctx.input_shapes) == 1 else None
        if self.unary is None:
            self.code = CODES[ctx.arg("type")]
            self.bounds = clip_bounds(activation_args(ctx))

    def bind(self, inputs, outputs, scratch=None):
        # arena tensors are contiguous: the flat reshapes are views the loop writes through
        if self.unary is not None:
            x, out = inputs[0], outputs[0]
            where = aliasing(x, out)
            if where == "overlap":
                return _reference.EltwiseCpu(self.ctx).bind(inputs, outputs)
            zero = np.float32(0)
            return unary_step(self.unary, zero, zero, x, out, where == "same")
        a, b, out = (t.reshape(-1) for t in (inputs[0], inputs[1], outputs[0]))
        return loop("binary_clip", (a, b, self.code, *self.bounds, out), out.size, 3 * out.size)
