"""FakeQuantize: a float tensor rounded to the grid of a uint8/int8 quantization and back.

    y = (clamp(round_half_even(x / scale) + zero_point, quant_min, quant_max) - zero_point) * scale

It is what an ONNX QuantizeLinear -> DequantizeLinear pair on an activation computes
(the frontend emits one per pair, mace/frontends/onnx/ops_quant.py, and one per quantized
tensor of a QOperator model, ops_qlinear.py), in float32 as onnxruntime does: divide, round
half to even, add, saturate; subtract, multiply; and TensorFlow's FakeQuant on its nudged
grid (ties half to even where TensorFlow rounds half up). Without the rounding a float run
of a QDQ model drifts from what the model defines (MTCNN's R-Net: cosine 0.9987 against
onnxruntime instead of 0.99999).

Quantizing a model (quantize: 1, runtime: dsp) makes it redundant: the quantize pass
rounds to the same grid (the pair's range is recorded, mace/ir/qat_ranges.py), so
lower_fake_quantize (mace/transform/passes/lower_fake_quantize.py) turns each one back
into the clamp it implies before the fusion passes run.
"""
import numpy as np

from mace.ir.args import get_arg
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op

F32 = np.float32


def grid(op):
    """(scale, zero_point, quant_min, quant_max) of a FakeQuantize op."""
    return (F32(get_arg(op, "scale")), int(get_arg(op, "zero_point")),
            int(get_arg(op, "quant_min")), int(get_arg(op, "quant_max")))


def real_range(scale, zero_point, quant_min, quant_max) -> tuple:
    """The float interval the grid spans (what the quantize pass records for the tensor)."""
    scale = F32(scale)
    return (float(scale * F32(quant_min - zero_point)), float(scale * F32(quant_max - zero_point)))


@register_op("FakeQuantize", layout=Layout.ELEMENTWISE)
class FakeQuantize(OpSpec):
    attrs = {"quant_max": REQUIRED, "quant_min": REQUIRED, "scale": REQUIRED, "zero_point": REQUIRED}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), np.dtype(F32))]


@kernel("FakeQuantize", "cpu")
class FakeQuantizeCpu(Kernel):
    def setup(self, ctx):
        self.scale, self.zero, self.lo, self.hi = grid(ctx.op)

    def run(self, inputs, outputs):
        out = outputs[0]
        np.divide(inputs[0], self.scale, out=out, dtype=F32)
        np.rint(out, out=out)
        out += F32(self.zero)
        np.clip(out, F32(self.lo), F32(self.hi), out=out)
        out -= F32(self.zero)
        out *= self.scale
