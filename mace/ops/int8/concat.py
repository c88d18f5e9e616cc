"""Quantized Concat: every input requantized to the output's scale / zero point, then joined.

Output range "own" (the joined tensor's range covers all inputs'). An input whose
parameters equal the output's is copied as is; the others go through a 256-entry
rescale table (integer requantize, mace/ops/int8/passthrough.py). Error against
the float concat of the dequantized inputs: <= 0.5 output step (0 for inputs that
share the output's parameters).
"""
import numpy as np

from mace.ops.concat import ConcatCpu
from mace.ops.int8._base import Int8Kernel, apply_table, float_consts, quantized_io, rescale_table
from mace.ops.registry import LOAD, kernel


@kernel("Concat", "int8")
class ConcatInt8(Int8Kernel, ConcatCpu):
    output_range = "own"

    @staticmethod
    def check(ctx) -> str | None:
        return quantized_io(ctx) if ctx.stage == LOAD else float_consts(ctx)

    def setup(self, ctx):
        super().setup(ctx)
        self.tables = [rescale_table(p, ctx.output_quant[0]) for p in ctx.input_quant]
        # each input's slab of the output along the axis
        cuts = np.cumsum([0] + [s[self.axis] for s in ctx.input_shapes])
        lead = (slice(None),) * self.axis
        self.slabs = [lead + (slice(int(a), int(b)),) for a, b in zip(cuts[:-1], cuts[1:])]

    def run(self, inputs, outputs):
        out = outputs[0]
        for table, x, slab in zip(self.tables, inputs, self.slabs):
            apply_table(table, x, out[slab])
