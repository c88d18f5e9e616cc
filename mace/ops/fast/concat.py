"""Concat, fast CPU kernel: each input copied into its column range of the output, viewed
as [outer rows, inner] (NHWC channel concat: [pixels, C]), by one compiled loop per input
split across the compute pool's threads when it pays. The reference's np.concatenate is
one serial pass plus ~3 us of call overhead (DenseNet-121's 58 concats: 1.2 ms a run)."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import concat as _reference  # noqa: F401 - registers the op type first
from mace.ops._common import normalize_axis
from mace.ops.fast._base import FastKernel, sequence
from mace.ops.fast._jit import loops
from mace.ops.fast._pool import loop
from mace.ops.registry import kernel


def float_concat(ctx) -> bool:
    return (loops() is not None and len(ctx.output_shapes[0]) >= 1
            and all(np.dtype(d) == np.float32 for d in list(ctx.input_dtypes) + list(ctx.output_dtypes)))


@kernel("Concat", "cpu:fast")
class ConcatFast(FastKernel):
    accepts = staticmethod(float_concat)

    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.output_shapes[0]))

    def bind(self, inputs, outputs, scratch=None):
        out = outputs[0]
        if out.size == 0 or not all(a.flags.c_contiguous for a in list(inputs) + [out]):
            return partial(np.concatenate, inputs, axis=self.axis, out=out)
        rows = int(np.prod(out.shape[:self.axis], dtype=np.int64))
        out2d = out.reshape(rows, -1)   # contiguous (arena tensors are): views all along
        steps, col = [], 0
        for x in inputs:
            x2d = x.reshape(rows, -1)
            steps.append(loop("copy_cols", (x2d, out2d, col), rows, 2 * x2d.size))
            col += x2d.shape[1]
        return sequence(steps)
