"""ResizeNearestNeighbor on the GPU: source row and column tables computed once at setup."""
from __future__ import annotations

import numpy as np

from mace.ops._resize import axis_params
from mace.ops.gpu._tensor import ResizeGpu
from mace.ops.registry import kernel
from mace.ops.resize_nearest import nearest_index


@kernel("ResizeNearestNeighbor", "gpu")
class ResizeNearestGpu(ResizeGpu):
    def prepare(self, ctx):
        n, h, w, c = ctx.input_shapes[0]
        (axes, mode) = axis_params(ctx, ctx.input_shapes[0])
        nearest = ctx.arg("nearest_mode")
        rows, cols = (nearest_index(i, o, s, mode, nearest) for i, o, s in axes)
        tables = [self.table(rows, np.int32), self.table(cols, np.int32)]
        self._bind_resize("resize_nearest", tables, n, h, w, len(rows), len(cols), c)
