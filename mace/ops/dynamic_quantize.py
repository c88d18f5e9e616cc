"""DynamicQuantize: quantize a float tensor to uint8 with a scale and zero point computed from its
own range at run time (ONNX DynamicQuantizeLinear; onnxruntime's quantize_dynamic puts one before
each MatMulInteger).

Outputs: y (uint8, x's shape), scale (float32 scalar), zero_point (uint8 scalar). The range is
widened to hold 0: scale = (max(0, max x) - min(0, min x)) / 255, zero_point = round(-min / scale)
saturated to [0, 255], y = saturate(round(x / scale) + zero_point), rounding half to even, in
float32 as onnxruntime computes it. An all-zero input gives scale 0, zero point 0, y 0.
Layout ELEMENTWISE: the range is the same in any layout and y follows x's (the scalar scale and
zero point have none), so a quantize_dynamic ConvInteger's chain stays NHWC around the conv
(ppocr_v2_cls's had a Transpose each side of every DynamicQuantize: 184 of its 948 steps).
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("DynamicQuantize", layout=Layout.ELEMENTWISE)
class DynamicQuantize(OpSpec):
    attrs = {}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), np.uint8), ((), np.float32), ((), np.uint8)]


def dynamic_quantize(x):
    x = np.asarray(x, np.float32)
    lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    scale = np.float32((hi - lo) / np.float32(255))
    if scale == 0:
        return np.zeros(x.shape, np.uint8), scale, np.uint8(0)
    zero = np.uint8(np.clip(np.rint(np.float32(0) - lo / scale), 0, 255))
    y = np.clip(np.rint(x / scale) + np.float32(zero), 0, 255).astype(np.uint8)
    return y, scale, zero


@kernel("DynamicQuantize", "cpu")
class DynamicQuantizeCpu(Kernel):
    def run(self, inputs, outputs):
        for out, value in zip(outputs, dynamic_quantize(inputs[0])):
            np.copyto(out, value)
