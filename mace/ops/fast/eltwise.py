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
the same bytes; a fused activation that is not a clip (ppocr_v4_det's last Add + SIGMOID) runs
its compiled loop in place after it. A tensor against a runtime tensor of one value per last-axis
channel (a squeeze-and-excitation block's x * scale, PP-OCR's and MediaPipe's) runs the same
loop, the channel values read from the arena.
Every other float32 kind numpy has as one ufunc (EXP, LOG, FLOOR, ROUND as np.rint, comparisons, ..., and any
broadcast of SUM / SUB / PROD / DIV / MIN / MAX) is that ufunc called into the output, bound at
load: the reference's own arithmetic (its constants, cast as it casts them), the same bytes,
without its result copy. Left to the reference: no numba for the loops above, other dtypes,
RSQRT-like numpy expressions without a ufunc (SQR_DIFF, MOD, POW), a PRELU fused into an
Eltwise, more than two inputs.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import eltwise as _reference   # its kernel takes the cases this one declines at bind
from mace.ops._common import activation_args, sequence
from mace.ops.fast._act_codes import CODES as ACT_CODES
from mace.ops.fast._act_codes import UNARY_CODES, aliasing
from mace.ops.fast._base import F32, FastKernel, activation_fn, clip_bounds
from mace.ops.fast._jit import act_loops, loops
from mace.ops.fast.compute import compute_of
from mace.ops.fast.activation import channel_slope, unary_step
from mace.ops.registry import kernel

CODES = {"SUM": 0, "SUB": 1, "PROD": 2, "MIN": 3, "MAX": 4}


def _float32(ctx) -> bool:
    return (all(np.dtype(d) == F32 for d in ctx.input_dtypes)
            and np.dtype(ctx.output_dtypes[0]) == F32)


def same_shape_pair(ctx) -> bool:
    """Two float32 tensors of the output's shape, at most one a constant (a dynamically quantized
    MatMul's scale product, scalar x scalar; BERT's embeddings + a constant table): one
    compiled pass, which a chain can take (numpy's ufunc ends one)."""
    shapes = ctx.input_shapes
    return (loops() is not None and ctx.arg("type") in CODES and len(shapes) == 2
            and tuple(shapes[0]) == tuple(shapes[1]) == tuple(ctx.output_shapes[0])
            and sum(c is not None for c in ctx.consts) <= 1 and _float32(ctx)
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
            or not _float32(ctx) or not compiled_or_clip(ctx):
        return None
    which = [i for i in (0, 1) if consts[i] is not None]
    if len(which) != 1 or tuple(shapes[1 - which[0]]) != tuple(ctx.output_shapes[0]):
        return None
    values = channel_slope(consts[which[0]], tuple(ctx.output_shapes[0]))
    if values is None or values.size == 0 or 0 in tuple(ctx.output_shapes[0]) \
            or (ctx.arg("type") in ("MIN", "MAX") and np.isnan(values).any()):
        return None   # an empty tensor (a TF strided slice of nothing) is the reference's
    return which[0], values


def compiled_or_clip(ctx) -> bool:
    """The fused activation is a clip (or none), or has a compiled in-place loop."""
    act = activation_args(ctx)
    return clip_bounds(act) is not None or (act_loops() is not None and act["act"] in ACT_CODES)


def runtime_channel(ctx):
    """Index of the runtime operand holding one float32 per last-axis channel of the other
    (shaped [1, ..., 1, C], C > 1), when the node is that pair, else None."""
    shapes, out = ctx.input_shapes, tuple(ctx.output_shapes[0])
    # MIN / MAX: the loop keeps x against a NaN channel value (declined for constants); numpy's
    # np.minimum / np.maximum into the output instead
    if act_loops() is None or ctx.arg("type") not in CONST_CODES or ctx.arg("type") in ("MIN", "MAX") \
            or len(shapes) != 2 \
            or any(c is not None for c in ctx.consts) or not _float32(ctx) \
            or not compiled_or_clip(ctx) or not out or out[-1] < 2 or 0 in out:
        return None
    for i in (0, 1):
        small = tuple(shapes[i])
        if tuple(shapes[1 - i]) == out and small and small[-1] == out[-1] \
                and len(small) <= len(out) and all(d == 1 for d in small[:-1]):
            return i
    return None


def ufunc_of(kind: str):
    """The numpy ufunc the reference computes Eltwise `kind` with on float32, or None."""
    # np.round with no decimals is np.rint (the same bytes) behind a Python-level wrapper
    fn = {"DIV": np.divide, "ROUND": np.rint}.get(kind) or _reference.UNARY.get(kind) or _reference.NARY.get(kind) \
        or _reference.BINARY.get(kind)
    return fn if isinstance(fn, np.ufunc) else None


def one_ufunc(ctx) -> bool:
    fn, act = ufunc_of(ctx.arg("type")), activation_args(ctx)
    if fn is None or len(ctx.input_shapes) != fn.nin or not all(np.dtype(d) == F32 for d in ctx.input_dtypes):
        return False
    out = np.dtype(ctx.output_dtypes[0])
    if out == np.bool_:
        return (act["act"] or "NOOP") == "NOOP"
    return out == F32 and act["act"] != "PRELU"


@kernel("Eltwise", "cpu:fast")
class EltwiseFast(FastKernel):
    @staticmethod
    def check(ctx) -> str | None:
        if (same_shape_pair(ctx) or float_unary(ctx) or const_operand(ctx) is not None
                or runtime_channel(ctx) is not None or one_ufunc(ctx)):
            return None
        kind, act = ctx.arg("type"), activation_args(ctx)["act"] or "NOOP"
        if not all(np.dtype(d) == F32 for d in ctx.input_dtypes):
            return "inputs are " + ", ".join(str(np.dtype(d)) for d in ctx.input_dtypes) + ", not all float32"
        if act == "PRELU":
            return "fused activation PRELU not supported"
        if ufunc_of(kind) is None and kind not in CODES and kind not in UNARY_CODES and kind not in CONST_CODES:
            return f"Eltwise {kind} has no fast form"
        shapes = " and ".join(str(list(s)) for s in ctx.input_shapes)
        return (f"Eltwise {kind} of {shapes} -> {list(ctx.output_shapes[0])}"
                + (f" with fused {act}" if act != "NOOP" else "")
                + ": not a same-shape pair, a unary op, or a tensor against a constant or per-channel operand")

    def setup(self, ctx):
        act = activation_args(ctx)
        self.path, self.bounds, self.after = "ufunc", clip_bounds(act), None
        if same_shape_pair(ctx):
            self.path, self.code = "pair", CODES[ctx.arg("type")]
            self.consts = _reference.EltwiseCpu(ctx).consts   # cast as the reference casts them
        elif float_unary(ctx):
            self.path, self.unary = "unary", UNARY_CODES[ctx.arg("type")]
        elif const_operand(ctx) is not None or runtime_channel(ctx) is not None:
            self.const = const_operand(ctx)
            self.channel = None if self.const is not None else runtime_channel(ctx)
            small = self.const[0] if self.const is not None else self.channel
            self.path, self.code = "const", CONST_CODES[ctx.arg("type")][1 - small]   # [0]: the constant second
        else:
            self.ufunc = ufunc_of(ctx.arg("type"))
            self.consts = _reference.EltwiseCpu(ctx).consts   # cast as the reference casts them
            if np.dtype(ctx.output_dtypes[0]) == F32:
                self.after = activation_fn(act)   # a clip too: the ufunc has none
            return
        if self.bounds is None:
            # not a clip: the loop stores unclipped, then the activation runs in place
            self.bounds, self.after = (F32.type(-np.inf), F32.type(np.inf)), activation_fn(act)

    def bind(self, inputs, outputs, scratch=None):
        step = {"pair": self._bind_pair, "unary": self._bind_unary, "const": self._bind_const,
                "ufunc": self._bind_ufunc}[self.path](inputs, outputs)
        if self.after is None:
            return step
        out = outputs[0]
        return sequence([step, partial(self.after, out)])

    def _bind_pair(self, inputs, outputs):
        # arena tensors are contiguous: the flat reshapes are views the loop writes through (a
        # 0-d scalar a 1-element vector: a chain passes arrays of one dimension or more); a
        # constant is read as the reference casts it
        a, b = (x.reshape(-1) if c is None else np.ascontiguousarray(c).reshape(-1)
                for c, x in zip(self.consts, inputs))
        out = outputs[0].reshape(-1)
        return compute_of(self.ctx).loop("binary_clip", (a, b, self.code, *self.bounds, out), out.size, 3 * out.size)

    def _bind_unary(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        where = aliasing(x, out)
        if where == "overlap":
            return _reference.EltwiseCpu(self.ctx).bind(inputs, outputs)
        zero = np.float32(0)
        return unary_step(compute_of(self.ctx), self.unary, zero, zero, x, out, where == "same")

    def _bind_ufunc(self, inputs, outputs):
        ins = [c if c is not None else x for c, x in zip(self.consts, inputs)]
        return partial(self.ufunc, *ins, out=outputs[0])

    def _bind_const(self, inputs, outputs):
        if self.const is not None:
            which, values = self.const
        else:
            which, values = self.channel, inputs[self.channel]
            if not values.flags.c_contiguous:
                return self._reference(inputs, outputs)
            values = values.reshape(-1)
        x, out = inputs[1 - which], outputs[0]
        where = aliasing(x, out)
        if where == "overlap" or not (x.flags.c_contiguous and out.flags.c_contiguous):
            return self._reference(inputs, outputs)
        bits = values.view(np.int32)   # equal bits: 0.0 and -0.0 are two constants here
        if self.const is not None and values.shape[0] < SCALAR_ROW and x.size % SCALAR_ROW == 0 \
                and (bits == bits[0]).all():
            values = np.full(SCALAR_ROW, values[0], np.float32)   # one number: rows of 256, not of C
        c = values.shape[0]
        x2, out2 = x.reshape(-1, c), out.reshape(-1, c)
        if where == "same":
            return compute_of(self.ctx).loop("const_binary_inplace", (x2, values, self.code, *self.bounds), x2.shape[0],
                        2 * x.size, lib=act_loops())
        return compute_of(self.ctx).loop("const_binary", (x2, values, self.code, *self.bounds, out2), x2.shape[0],
                    2 * x.size, lib=act_loops())

    def _reference(self, inputs, outputs):
        self.after = None   # the reference applies the fused activation itself
        return _reference.EltwiseCpu(self.ctx).bind(inputs, outputs)
