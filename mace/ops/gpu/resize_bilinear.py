"""ResizeBilinear on the GPU: row and column tables computed once at setup."""
from __future__ import annotations

import numpy as np

from mace.ops._resize import axis_params
from mace.ops.gpu._tensor import ResizeGpu
from mace.ops.registry import kernel
from mace.ops.resize_bilinear import linear_table


@kernel("ResizeBilinear", "gpu")
class ResizeBilinearGpu(ResizeGpu):
    def prepare(self, ctx):
        n, h, w, c = ctx.input_shapes[0]
        (axes, mode) = axis_params(ctx, ctx.input_shapes[0])
        (_, oh, sh), (_, ow, sw) = axes
        r_lo, r_hi, _, r_w = linear_table(h, oh, sh, mode)
        c_lo, c_hi, _, c_w = linear_table(w, ow, sw, mode)
        tables = [self.table(r_lo, np.int32), self.table(r_hi, np.int32), self.table(r_w, np.float32),
                  self.table(c_lo, np.int32), self.table(c_hi, np.int32), self.table(c_w, np.float32)]
        self._bind_resize("resize_bilinear", tables, n, h, w, oh, ow, c)
