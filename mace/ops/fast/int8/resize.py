"""ResizeBilinear, fast int8: the reference's fixed-point blend (mace/ops/int8/resize.py: 10-bit
weights per axis, rows then columns on the centred codes, one requantize) in one compiled
pass per output row instead of eight numpy ones over int32 temporaries, output rows split
across the compute pool. The same integers: the reference's int32 sums never overflow
(|code - zero| <= 255, weights summing to 2^10 per axis: at most 255 * 2^20)."""
from __future__ import annotations

import numpy as np

from mace.ops.fast._checks import not_uint8
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qjit import no_loops_or, qloops
from mace.ops.int8.resize import ResizeBilinearInt8
from mace.ops.registry import kernel


def _ints(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a).reshape(-1), np.int64)


@kernel("ResizeBilinear", "int8:fast")
class ResizeBilinearInt8Fast(ResizeBilinearInt8):
    @staticmethod
    def check(ctx) -> str | None:
        reason = no_loops_or(ResizeBilinearInt8.check, ctx)
        if reason:
            return reason
        if len(ctx.input_shapes[0]) != 4:
            return f"rank {len(ctx.input_shapes[0])} input (4-D only)"
        return not_uint8(ctx)

    def setup(self, ctx):
        super().setup(ctx)
        self.tables = tuple(_ints(a) for a in self.rows + self.cols)
        left = max(1 - int(self.shift), 0)   # requantize's pre-shift for multipliers >= 1
        self.requant = (int(self.mult), left, int(self.shift) + left)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if self.nchw or not (x.flags.c_contiguous and out.flags.c_contiguous):
            return lambda: ResizeBilinearInt8.run(self, inputs, outputs)
        n, oh = out.shape[0], out.shape[1]
        args = (x, self.zero_in, *self.tables, *self.requant, self.zero_out, out)
        return compute_of(self.ctx).loop("qresize_bilinear", args, n * oh, 6 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
