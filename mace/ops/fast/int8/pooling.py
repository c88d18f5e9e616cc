"""Pooling MAX / AVG, fast int8: one compiled loop per output row range, taps outside the
input skipped: MAX (_qloops.qmaxpool) takes the largest code in uint8 lanes and applies the
reference's rescale table where the output's parameters differ; AVG (_qloops.qavgpool) sums
the centred codes and requantizes per output position with the reference's multipliers
(mace/ops/int8/pooling.py). Both split across the compute pool by output rows."""
from __future__ import annotations

import numpy as np

from mace.ops.fast._checks import not_uint8
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qjit import no_loops_or, qloops
from mace.ops.fast.int8.concat import IDENTITY
from mace.ops.int8.pooling import PoolingInt8
from mace.ops.registry import kernel

@kernel("Pooling", "int8:fast")
class PoolingInt8Fast(PoolingInt8):
    @staticmethod
    def check(ctx) -> str | None:
        reason = no_loops_or(PoolingInt8.check, ctx)
        if reason:
            return reason
        if len(ctx.input_shapes[0]) != 4:
            return f"rank {len(ctx.input_shapes[0])} input (4-D only)"
        reason = not_uint8(ctx)
        if reason:
            return reason
        kind = ctx.arg("pooling_type", "")
        return None if kind in ("MAX", "AVG") else f"pooling_type {kind} (MAX / AVG only)"

    def setup(self, ctx):
        super().setup(ctx)
        self.xp = self.acc = None   # the reference's padded buffer and sums: unused here
        if self.is_max:
            self.identity = self.table is None
            self.table = IDENTITY if self.table is None else self.table
            return
        shape = tuple(self.out_hw)
        mult = np.broadcast_to(np.asarray(self.mult, np.int64).reshape(shape), shape)
        shift = np.broadcast_to(np.asarray(self.shift, np.int64).reshape(shape), shape)
        left = np.maximum(1 - shift, 0)
        self.columns = tuple(np.ascontiguousarray(a) for a in (mult, left, shift + left))

    def bind(self, inputs, outputs, scratch=None):
        out = outputs[0]
        n, oh, ow, c = out.shape
        if self.is_max:
            if not (inputs[0].flags.c_contiguous and out.flags.c_contiguous):   # qmaxpool reads by address
                return lambda: PoolingInt8.run(self, inputs, outputs)
            args = (inputs[0], *self.k, *self.strides, *self.dil, self.pads[0], self.pads[1],
                    self.table, self.identity, out)
            return compute_of(self.ctx).loop("qmaxpool", args, n * oh, out.size * self.k[0] * self.k[1], lib=qloops())
        args = (inputs[0], self.zero_in, *self.k, *self.strides, *self.dil, self.pads[0], self.pads[1],
                *self.columns, self.zero_out, out)
        return compute_of(self.ctx).loop("qavgpool", args, n * oh, out.size * self.k[0] * self.k[1], lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()
