"""Reduce, fast CPU kernel: MEAN / SUM / MAX / MIN over H and W of an NHWC float32 tensor
(global pooling at a classifier's head) as one compiled pass over [n, pixels, C]. The
reference's np.mean over axes (1, 2) costs 40-100 us on MobileNet's / DenseNet's heads."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import reduce as _reference
from mace.ops.fast._base import FastKernel
from mace.ops.fast._jit import loops
from mace.ops.registry import kernel

KINDS = {"MEAN": 0, "SUM": 1, "MAX": 2, "MIN": 3}


def global_pixels(ctx) -> bool:
    shape = ctx.input_shapes[0]
    return (loops() is not None and ctx.arg("reduce_type") in KINDS and len(shape) == 4
            and _reference.reduce_axes(ctx.arg, 4) == (1, 2) and shape[1] * shape[2] > 0
            and np.dtype(ctx.input_dtypes[0]) == np.float32
            and np.dtype(ctx.output_dtypes[0]) == np.float32)


@kernel("Reduce", "cpu:fast")
class ReduceFast(FastKernel):
    accepts = staticmethod(global_pixels)

    def setup(self, ctx):
        self.kind = KINDS[ctx.arg("reduce_type")]

    def bind(self, inputs, outputs, scratch=None):
        x = inputs[0]
        n, h, w, c = x.shape
        # arena tensors are contiguous: both reshapes are views
        return partial(loops().reduce_pixels, x.reshape(n, h * w, c), self.kind,
                       outputs[0].reshape(n, c))
