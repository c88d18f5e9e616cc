"""Quantized Pad: the float kernel moves uint8 values; CONSTANT pads with the constant
quantized to the output (the zero point for 0.0)."""
from __future__ import annotations

import numpy as np

from mace.ir import quant_params as qp
from mace.ops.int8._base import apply_table
from mace.ops.int8.passthrough import PassThrough
from mace.ops.pad import PadCpu
from mace.ops.registry import kernel


@kernel("Pad", "int8")
class PadInt8(PassThrough, PadCpu):
    """CONSTANT pads with constant_value quantized to the output (0.0: the zero point).

    The pad value is written after the rescale so that it is never requantized twice.
    """

    def setup(self, ctx):
        super().setup(ctx)
        out_p = ctx.output_quant[0]
        self.value = int(qp.quantize(np.float64(ctx.arg("constant_value")), out_p))

    def run(self, inputs, outputs):
        if self.mode != "constant":
            super().run(inputs, outputs)
            return
        out = outputs[0]
        out[...] = self.value
        apply_table(self.tables[0], inputs[0][self.crop], out[self.inner])
