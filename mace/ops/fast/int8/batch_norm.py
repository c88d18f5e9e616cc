"""BatchNorm, fast int8: the reference's [C, 256] tables (mace/ops/int8/batch_norm.py), one
compiled lookup per element (_qloops.lookup_channels) split across the compute pool by rows
of channels; the same bytes by construction."""
from __future__ import annotations

from mace.ops.fast._checks import NO_LOOPS
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qjit import qloops
from mace.ops.int8.batch_norm import BatchNormInt8
from mace.ops.registry import kernel


@kernel("BatchNorm", "int8:fast")
class BatchNormInt8Fast(BatchNormInt8):
    @staticmethod
    def check(ctx) -> str | None:
        return NO_LOOPS if qloops() is None else BatchNormInt8.check(ctx)

    def bind(self, inputs, outputs, scratch=None):
        loop = compute_of(self.ctx).loop   # the engine's threads
        x, out = inputs[0], outputs[0]
        if not (x.flags.c_contiguous and out.flags.c_contiguous):
            return lambda: BatchNormInt8.run(self, inputs, outputs)
        c = self.tables.shape[0]
        x, out = x.reshape(-1, c), out.reshape(-1, c)
        return loop("lookup_channels", (x, self.tables, out), out.shape[0], 2 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
