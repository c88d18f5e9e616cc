"""Quantize / Dequantize, fast: the model's float <-> uint8 edges as one compiled pass each
(_qloops.quantize / dequantize), the same float64 arithmetic as the reference kernels
(mace/ops/quantize.py: four and two numpy passes through a float64 temporary)."""
from __future__ import annotations

import numpy as np

from mace.ops.fast._pool import loop
from mace.ops.fast.int8._qjit import qloops
from mace.ops.quantize import DequantizeCpu, QuantizeCpu
from mace.ops.registry import kernel


def contiguous(*arrays) -> bool:
    return all(a.flags.c_contiguous for a in arrays)


@kernel("Quantize", "int8:fast")
class QuantizeInt8Fast(QuantizeCpu):
    @staticmethod
    def accepts(ctx) -> bool:
        return (qloops() is not None and bool(ctx.output_quant) and ctx.output_quant[0] is not None
                and np.dtype(ctx.input_dtypes[0]) == np.float32
                and np.dtype(ctx.output_dtypes[0]) == np.uint8)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if not contiguous(x, out):
            return lambda: QuantizeCpu.run(self, inputs, outputs)
        args = (x.reshape(-1), float(self.inv_scale), float(self.zero), out.reshape(-1))
        return loop("quantize", args, out.size, 2 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()


@kernel("Dequantize", "int8:fast")
class DequantizeInt8Fast(DequantizeCpu):
    @staticmethod
    def accepts(ctx) -> bool:
        return (qloops() is not None and bool(ctx.input_quant) and ctx.input_quant[0] is not None
                and np.dtype(ctx.input_dtypes[0]) == np.uint8
                and np.dtype(ctx.output_dtypes[0]) == np.float32)

    def bind(self, inputs, outputs, scratch=None):
        q, out = inputs[0], outputs[0]
        if not contiguous(q, out):
            return lambda: DequantizeCpu.run(self, inputs, outputs)
        args = (q.reshape(-1), float(self.scale), int(self.zero), out.reshape(-1))
        return loop("dequantize", args, out.size, 2 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
