"""Softmax along the last axis, fast CPU kernel: one compiled pass per row (numba).

The reference's five numpy calls (max, subtract, exp, sum, divide) cost ~3.6 us
on the digits example's 1x10 logits, all of it call overhead; the compiled
loop (_act_loops.softmax_rows) takes ~0.3 us. Without numba the reference runs.
Along another axis (YOLOv8's DFL head: axis 1 of [1, 16, 4, 2100]) numpy's passes run along
the long inner axis, vectorized, at ~1.6 ns an element: they stay (the reference's own code,
bound here). Moving the axis last for the row loop measured 4x slower (two transposed copies,
rows of 16).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import softmax as _reference
from mace.ops._common import normalize_axis
from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import act_loops
from mace.ops.registry import kernel


def any_axis_float(ctx) -> str | None:
    shape = ctx.input_shapes[0]
    if act_loops() is None:
        return NO_LOOPS
    if len(shape) < 1 or 0 in shape:
        return f"input shape {list(shape)} (rank >= 1, no empty axis)"
    return not_float32(ctx)


def _around(shape, axis) -> tuple:
    """(outer, k, inner): the tensor as a 3-D block with the softmax axis in the middle."""
    return (int(np.prod(shape[:axis], dtype=np.int64)), shape[axis],
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


@kernel("Softmax", "cpu:fast")
class SoftmaxFast(FastKernel):
    check = staticmethod(any_axis_float)

    def setup(self, ctx):
        self.log = bool(ctx.arg("use_log", 0))
        shape = tuple(ctx.input_shapes[0])
        self.block = _around(shape, normalize_axis(ctx.arg("axis", -1), len(shape)))

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        outer, k, inner = self.block
        if inner > 1:   # numpy's passes along the inner axis (see the module's note)
            return _reference.SoftmaxCpu(self.ctx).bind(inputs, outputs)
        # arena tensors are contiguous, so both reshapes are views the loop writes through
        return partial(act_loops().softmax_rows, x.reshape(-1, k), self.log, out.reshape(-1, k))
