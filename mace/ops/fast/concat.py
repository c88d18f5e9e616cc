"""Concat, fast CPU kernel: each input copied into its column range of the output, viewed
as [outer rows, inner] (NHWC channel concat: [pixels, C]), by one compiled loop per input
split across the compute pool's threads when it pays. The reference's np.concatenate is
one serial pass plus ~3 us of call overhead (DenseNet-121's 58 concats: 1.2 ms a run)."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import normalize_axis, sequence
from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel


def float_concat(ctx) -> str | None:
    if loops() is None:
        return NO_LOOPS
    if len(ctx.output_shapes[0]) < 1:
        return "scalar output"
    return not_float32(ctx, range(len(ctx.input_dtypes)), range(len(ctx.output_dtypes)))


@kernel("Concat", "cpu:fast")
class ConcatFast(FastKernel):
    check = staticmethod(float_concat)

    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.output_shapes[0]))

    def bind(self, inputs, outputs, scratch=None):
        loop = compute_of(self.ctx).loop   # the engine's threads
        out = outputs[0]
        # inputs the engine made views of their place in `out` (in-place concat): written there
        # by their producers already
        placed = in_place(inputs, out, self.axis)
        rest = [x for x, done in zip(inputs, placed) if not done]
        if out.size == 0 or not all(a.flags.c_contiguous for a in rest + [out]):
            if any(placed):
                raise ValueError("an in-place concat needs its other inputs contiguous")
            return partial(np.concatenate, inputs, axis=self.axis, out=out)
        rows = int(np.prod(out.shape[:self.axis], dtype=np.int64))
        out2d = out.reshape(rows, -1)   # contiguous (arena tensors are): views all along
        steps, col = [], 0
        for x, done in zip(inputs, placed):
            width = int(np.prod(x.shape[self.axis:], dtype=np.int64))
            if not done:
                steps.append(loop("copy_cols", (x.reshape(rows, -1), out2d, col), rows, 2 * x.size))
            col += width
        return sequence(steps) if steps else _nothing


def _nothing():
    pass


def in_place(inputs, out, axis: int) -> list:
    """Per input: whether it is exactly its own slice of `out` along `axis` (same memory,
    same strides): the engine's in-place concat made it so."""
    placed, start = [], 0
    for x in inputs:
        stop = start + x.shape[axis]
        target = out[(slice(None),) * axis + (slice(start, stop),)]
        placed.append(x.shape == target.shape and x.strides == target.strides
                      and x.__array_interface__["data"][0] == target.__array_interface__["data"][0])
        start = stop
    return placed
