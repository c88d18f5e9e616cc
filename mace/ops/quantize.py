"""Quantize / Dequantize: the float <-> uint8 edges of a quantized model.

Quantize: q = clamp(round_half_even(x / scale) + zero_point, 0, 255), the output's
scale/zero point in the op's quantize_info. Dequantize: x = scale * (q - zero_point),
the input's parameters from its producer. The quantize pass
(mace/transform/passes/quantize.py) inserts them wherever float and quantized ops
meet; both run on CPU and on the DSP (tag "int8"), so a DSP graph is closed.
"""
import numpy as np

from mace.ir.quant_params import UINT8_MAX, UINT8_MIN
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("Quantize", layout=Layout.ELEMENTWISE)
class Quantize(OpSpec):
    attrs = {}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), np.dtype(np.uint8))]


@register_op("Dequantize", layout=Layout.ELEMENTWISE)
class Dequantize(OpSpec):
    attrs = {}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), np.dtype(np.float32))]


@kernel("Quantize", "cpu")
class QuantizeCpu(Kernel):
    def setup(self, ctx):
        p = ctx.output_quant[0] if ctx.output_quant else None
        if p is None:
            raise ValueError(f"Quantize '{ctx.op.name}' has no output range (quantize_info)")
        self.inv_scale, self.zero = 1.0 / np.float64(p.scale), np.float64(p.zero_point)
        self.tmp = np.empty(ctx.output_shapes[0], np.float64)

    def run(self, inputs, outputs):
        # float64: the one rounding step is the same on every machine
        np.multiply(inputs[0], self.inv_scale, out=self.tmp)
        np.rint(self.tmp, out=self.tmp)
        self.tmp += self.zero
        np.clip(self.tmp, UINT8_MIN, UINT8_MAX, out=self.tmp)
        np.copyto(outputs[0], self.tmp, casting="unsafe")


@kernel("Dequantize", "cpu")
class DequantizeCpu(Kernel):
    def setup(self, ctx):
        p = ctx.input_quant[0] if ctx.input_quant else None
        if p is None:
            raise ValueError(f"Dequantize '{ctx.op.name}': its input carries no quantization")
        self.scale, self.zero = np.float32(p.scale), np.int32(p.zero_point)
        self.tmp = np.empty(ctx.output_shapes[0], np.int32)

    def run(self, inputs, outputs):
        np.subtract(inputs[0], self.zero, out=self.tmp, dtype=np.int32)
        np.multiply(self.tmp, self.scale, out=outputs[0])


@kernel("Quantize", "int8")
class QuantizeInt8(QuantizeCpu):
    pass


@kernel("Dequantize", "int8")
class DequantizeInt8(DequantizeCpu):
    pass
