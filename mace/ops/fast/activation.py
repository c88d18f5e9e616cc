"""Activation on float32 tensors, fast CPU kernel: one compiled, vectorized pass (numba).

Why: the references are numpy expressions of 3-10 passes each, and their exp / tanh / erf
are scalar-speed calls: SIGMOID (YOLOv8's SiLU is 57 SIGMOIDs) cost ~20 ns an element, GELU
(scipy erf in float64) ~8, PRELU ~5. The loops (_act_loops.unary / prelu) read x once and
write once, their transcendental functions written out in float64 so LLVM vectorizes them;
per element, 1 thread, 64k floats (benchmarks/bench_activations.py has the current table):
SIGMOID ~1 ns, GELU ~2.5, PRELU / LEAKYRELU / HARDSWISH ~0.1-0.2. Within 1-2 ulp of the
references (exactly theirs for the piecewise-linear kinds; tests/ops/test_fast_activations.py).

RELU / RELUX / CLIP are one call of np.clip's ufunc and TANH one np.tanh (numpy's vectorized float32 ufuncs,
faster than a float64 loop here): that call from x straight into the output, bound at load
(the reference copies x to the output first, then runs it in place): the same bytes.
Declined (the reference runs): no numba, non-float32 tensors, a PRELU slope that is not a
constant per last-axis channel (or one number), broadcast inputs, the kinds without a loop
(SOFTSIGN, CELU, THRESHOLDEDRELU, SHRINK).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import activation as _reference   # its kernel takes the cases this one declines at bind
from mace.ops.fast._act_codes import CODES, aliasing, loop_name, params, work
from mace.ops.fast._base import CLIP_UFUNC, FastKernel, clip_bounds
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import act_loops
from mace.ops.fast.compute import ComputeContext, compute_of
from mace.ops.registry import kernel

COMPILED = frozenset(CODES) | {"PRELU"}
NUMPY_KINDS = frozenset({"RELU", "RELUX", "CLIP", "TANH"})   # one numpy ufunc pass already


def channel_slope(slope, shape) -> np.ndarray | None:
    """PRELU's slope as one float32 per last-axis channel of `shape`, or None where it varies
    along another axis (NCHW-shaped slopes) or is not a constant."""
    if slope is None or not shape:
        return None
    slope = np.asarray(slope, np.float32)
    c = shape[-1]
    if slope.ndim > len(shape) or any(d != 1 for d in slope.shape[:-1]) or \
            (slope.ndim and slope.shape[-1] not in (1, c)):
        return None
    return np.ascontiguousarray(np.broadcast_to(slope.reshape(-1), (c,)))


def float_activation(ctx) -> str | None:
    kind = ctx.arg("activation")
    shape = tuple(ctx.input_shapes[0])
    if kind in NUMPY_KINDS:
        if shape != tuple(ctx.output_shapes[0]):
            return "output shape is not the input's"
        if len(ctx.input_shapes) != 1:
            return f"{kind} with {len(ctx.input_shapes)} inputs"
        return not_float32(ctx)
    if act_loops() is None:
        return NO_LOOPS
    if kind not in COMPILED:
        return f"activation {kind} has no compiled loop"
    if shape != tuple(ctx.output_shapes[0]):
        return "output shape is not the input's"
    reason = not_float32(ctx)
    if reason:
        return reason
    if kind == "PRELU":
        if len(ctx.consts) == 2 and channel_slope(ctx.consts[1], shape) is not None:
            return None
        return "PRELU slope is not a constant of one value or one per channel"
    return None if len(ctx.input_shapes) == 1 else f"{kind} with {len(ctx.input_shapes)} inputs"


@kernel("Activation", "cpu:fast")
class ActivationFast(FastKernel):
    check = staticmethod(float_activation)

    def setup(self, ctx):
        self.kind = ctx.arg("activation")
        self.a, self.b = params(self.kind, ctx.arg("activation_coefficient", 0.0),
                                ctx.arg("max_limit", 0.0), ctx.arg("beta", 0.0))
        if self.kind == "PRELU":
            self.slope = channel_slope(ctx.consts[1], tuple(ctx.input_shapes[0]))

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if self.kind == "TANH":
            return partial(np.tanh, x, out=out)
        if self.kind in NUMPY_KINDS:
            lo, hi = clip_bounds(dict(act=self.kind, alpha=self.ctx.arg("activation_coefficient", 0.0),
                                      max_limit=self.ctx.arg("max_limit", 0.0)))
            return partial(CLIP_UFUNC, x, lo, hi, out=out)
        where = aliasing(x, out)
        if not (x.flags.c_contiguous and out.flags.c_contiguous) or where == "overlap":
            return _reference.ActivationCpu(self.ctx).bind(inputs, outputs)
        same, lib = where == "same", act_loops()
        if self.kind == "PRELU":
            c = self.slope.shape[0]
            x2, out2 = x.reshape(-1, c), out.reshape(-1, c)
            if same:
                return compute_of(self.ctx).loop("prelu_inplace", (x2, self.slope), x2.shape[0], 2 * x.size, lib=lib)
            return compute_of(self.ctx).loop("prelu", (x2, self.slope, out2), x2.shape[0], 2 * x.size, lib=lib)
        return unary_step(compute_of(self.ctx), CODES[self.kind], self.a, self.b, x, out, same)


def unary_step(compute: ComputeContext, code: int, a, b, x, out, same: bool):
    """The step running loop `code` over contiguous x into out (x itself when `same`), split on
    `compute`'s pool."""
    x1, out1 = x.reshape(-1), out.reshape(-1)
    args = (x1, code, a, b) if same else (x1, code, a, b, out1)
    return compute.loop(loop_name(code, same), args, x1.size, work(code, x1.size), lib=act_loops())
