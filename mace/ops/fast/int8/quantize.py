"""Quantize / Dequantize, fast: the model's float <-> uint8 edges as one compiled pass each
(_qloops.quantize / dequantize), the same float64 arithmetic as the reference kernels
(mace/ops/quantize.py: four and two numpy passes through a float64 temporary)."""
from __future__ import annotations

from mace.ops.fast._checks import NO_LOOPS, not_float32, not_uint8
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qjit import qloops
from mace.ops.quantize import DequantizeCpu, QuantizeCpu
from mace.ops.registry import kernel


def contiguous(*arrays) -> bool:
    return all(a.flags.c_contiguous for a in arrays)


@kernel("Quantize", "int8:fast")
class QuantizeInt8Fast(QuantizeCpu):
    @staticmethod
    def check(ctx) -> str | None:
        if qloops() is None:
            return NO_LOOPS
        if not ctx.output_quant or ctx.output_quant[0] is None:
            return "output has no quantization parameters"
        return not_float32(ctx, outputs=()) or not_uint8(ctx)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if not contiguous(x, out):
            return lambda: QuantizeCpu.run(self, inputs, outputs)
        args = (x.reshape(-1), float(self.inv_scale), float(self.zero), out.reshape(-1))
        return compute_of(self.ctx).loop("quantize", args, out.size, 2 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()


@kernel("Dequantize", "int8:fast")
class DequantizeInt8Fast(DequantizeCpu):
    @staticmethod
    def check(ctx) -> str | None:
        if qloops() is None:
            return NO_LOOPS
        if not ctx.input_quant or ctx.input_quant[0] is None:
            return "input has no quantization parameters"
        return not_uint8(ctx, inputs=(0,), outputs=()) or not_float32(ctx, inputs=())

    def bind(self, inputs, outputs, scratch=None):
        q, out = inputs[0], outputs[0]
        if not contiguous(q, out):
            return lambda: DequantizeCpu.run(self, inputs, outputs)
        args = (q.reshape(-1), float(self.scale), int(self.zero), out.reshape(-1))
        return compute_of(self.ctx).loop("dequantize", args, out.size, 2 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
