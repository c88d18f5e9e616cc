"""Softmax over the last axis, fast int8: the reference's integer steps (mace/ops/int8/
softmax.py: exp table, int64 row sum, rounded Q30 division, requantize) in one compiled pass
per row instead of six numpy ones, rows split across the compute pool. The same integers."""
from __future__ import annotations

from mace.ops.fast._checks import NO_LOOPS, not_uint8
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qjit import qloops
from mace.ops.int8.softmax import PROB_BITS, SoftmaxInt8
from mace.ops.registry import kernel


@kernel("Softmax", "int8:fast")
class SoftmaxInt8Fast(SoftmaxInt8):
    @staticmethod
    def check(ctx) -> str | None:
        return NO_LOOPS if qloops() is None else SoftmaxInt8.check(ctx) or not_uint8(ctx)

    def setup(self, ctx):
        super().setup(ctx)
        # requantize's left shift: none while the multiplier is below 1 (1 / (2^30 out_scale))
        self.general = int(self.shift) < 1

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if self.general or not (x.flags.c_contiguous and out.flags.c_contiguous) or x.ndim == 0:
            return lambda: SoftmaxInt8.run(self, inputs, outputs)
        n = x.shape[-1]
        x2, out2 = x.reshape(-1, n), out.reshape(-1, n)
        args = (x2, self.table, PROB_BITS, int(self.mult), int(self.shift), self.zero_out, out2)
        return compute_of(self.ctx).loop("qsoftmax", args, x2.shape[0], 3 * x.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
