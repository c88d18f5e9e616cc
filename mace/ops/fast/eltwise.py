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
A tensor against a constant of one number or one per last-axis channel (SUM, SUB, PROD, DIV,
MIN, MAX, either side; Paddle2ONNX's hardswish is x * clip(x + 3, 0, 6) / 6 and a per-channel
affine) runs _act_loops.const_binary: the reference's float32 operation and clip in one pass,
the same bytes. Other broadcasts, other kinds, non-clip activations (a fused one after a
unary op too) and the no-numba case stay with the reference kernel.
"""
from __future__ import annotations

import numpy as np

from mace.ops import eltwise as _reference   # its kernel takes the cases this one declines at bind
from mace.ops._common import activation_args
from mace.ops.fast._act_codes import UNARY_CODES, aliasing
from mace.ops.fast._base import F32, FastKernel, clip_bounds
from mace.ops.fast._jit import act_loops, loops
from mace.ops.fast._pool import loop
from mace.ops.fast.activation import channel_slope, unary_step
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


# Eltwise type -> _act_loops.const_binary's code, (tensor op constant, constant op tensor)
CONST_CODES = {"SUM": (0, 0), "SUB": (1, 2), "PROD": (3, 3), "DIV": (4, 5), "MIN": (6, 6),
               "MAX": (7, 7)}


SCALAR_ROW = 256


def const_operand(ctx):
    """(index of the constant, its float32 values per last-axis channel) when the node is a
    float32 tensor against a constant of one number or one per channel, else None."""
    consts, shapes = ctx.consts, ctx.input_shapes
    if act_loops() is None or ctx.arg("type") not in CONST_CODES or len(shapes) != 2 \
            or not _float32(ctx) or clip_bounds(activation_args(ctx)) is None:
        return None
    which = [i for i in (0, 1) if consts[i] is not None]
    if len(which) != 1 or tuple(shapes[1 - which[0]]) != tuple(ctx.output_shapes[0]):
        return None
    values = channel_slope(consts[which[0]], tuple(ctx.output_shapes[0]))
    if values is None or values.size == 0 or 0 in tuple(ctx.output_shapes[0]) \
            or (ctx.arg("type") in ("MIN", "MAX") and np.isnan(values).any()):
        return None   # an empty tensor (a TF strided slice of nothing) is the reference's
    return which[0], values


@kernel("Eltwise", "cpu:fast")
class EltwiseFast(FastKernel):
    @staticmethod
    def accepts(ctx) -> bool:
        return same_shape_pair(ctx) or float_unary(ctx) or const_operand(ctx) is not None

    def setup(self, ctx):
        self.unary = UNARY_CODES.get(ctx.arg("type")) if len(ctx.input_shapes) == 1 else None
        self.const = None if self.unary is not None else const_operand(ctx)
        if self.unary is None:
            self.bounds = clip_bounds(activation_args(ctx))
        if self.const is not None:
            self.code = CONST_CODES[ctx.arg("type")][1 - self.const[0]]   # [0]: the constant second
        elif self.unary is None:
            self.code = CODES[ctx.arg("type")]

    def bind(self, inputs, outputs, scratch=None):
        # arena tensors are contiguous: the flat reshapes are views the loop writes through
        if self.const is not None:
            return self._bind_const(inputs, outputs)
        if self.unary is not None:
            x, out = inputs[0], outputs[0]
            where = aliasing(x, out)
            if where == "overlap":
                return _reference.EltwiseCpu(self.ctx).bind(inputs, outputs)
            zero = np.float32(0)
            return unary_step(self.unary, zero, zero, x, out, where == "same")
        a, b, out = (t.reshape(-1) for t in (inputs[0], inputs[1], outputs[0]))
        return loop("binary_clip", (a, b, self.code, *self.bounds, out), out.size, 3 * out.size)

    def _bind_const(self, inputs, outputs):
        which, values = self.const
        x, out = inputs[1 - which], outputs[0]
        where = aliasing(x, out)
        if where == "overlap" or not (x.flags.c_contiguous and out.flags.c_contiguous):
            return _reference.EltwiseCpu(self.ctx).bind(inputs, outputs)
        bits = values.view(np.int32)   # equal bits: 0.0 and -0.0 are two constants here
        if values.shape[0] < SCALAR_ROW and x.size % SCALAR_ROW == 0 and (bits == bits[0]).all():
            values = np.full(SCALAR_ROW, values[0], np.float32)   # one number: rows of 256, not of C
        c = values.shape[0]
        x2, out2 = x.reshape(-1, c), out.reshape(-1, c)
        if where == "same":
            return loop("const_binary_inplace", (x2, values, self.code, *self.bounds), x2.shape[0],
                        2 * x.size, lib=act_loops())
        return loop("const_binary", (x2, values, self.code, *self.bounds, out2), x2.shape[0],
                    2 * x.size, lib=act_loops())
