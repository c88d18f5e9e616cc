"""Activation, fast int8: any quantized activation is a function of one byte, so its 256-entry
table is the reference kernel (mace/ops/int8/activation.py) run once at load on every code,
and a run is one compiled lookup per element (_qloops.lookup), split across the compute pool;
the same bytes as the reference by construction (numpy's take / clip made one pass each)."""
from __future__ import annotations

import numpy as np

from mace.ops.fast._checks import not_uint8
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qjit import no_loops_or, qloops
from mace.ops.int8.activation import ActivationInt8
from mace.ops.registry import kernel

U8 = np.dtype(np.uint8)


def code_table(run) -> np.ndarray:
    """table[q] = run([q]) for every uint8 code q (run writes a uint8 output)."""
    table = np.empty(256, np.uint8)
    run([np.arange(256, dtype=np.uint8)], [table])
    return table


@kernel("Activation", "int8:fast")
class ActivationInt8Fast(ActivationInt8):
    @staticmethod
    def check(ctx) -> str | None:
        reason = no_loops_or(ActivationInt8.check, ctx)
        if reason:
            return reason
        if len(ctx.input_shapes) != 1:
            return f"{len(ctx.input_shapes)} inputs (one only)"
        return not_uint8(ctx)

    def setup(self, ctx):
        super().setup(ctx)
        self.codes = code_table(lambda inputs, outputs: ActivationInt8.run(self, inputs, outputs))

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if not (x.flags.c_contiguous and out.flags.c_contiguous):
            return lambda: ActivationInt8.run(self, inputs, outputs)
        x, out = x.reshape(-1), out.reshape(-1)
        return compute_of(self.ctx).loop("lookup", (x, self.codes, out), out.size, 2 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
