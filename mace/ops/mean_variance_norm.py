"""MeanVarianceNorm: (x - mean) / std over arg `axes` (ONNX MeanVarianceNormalization).

Default axes [0, 2, 3]; ONNX's reference adds 1e-9 to the std. Layout ANY: the axes count in the
framework's layout.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


def _mvn_axes(ctx, rank):
    return tuple(sorted(normalize_axis(a, rank) for a in ctx.arg("axes", [0, 2, 3])))


@register_op("MeanVarianceNorm", layout=Layout.ANY)
class MeanVarianceNorm(OpSpec):
    attrs = {"axes": [0, 2, 3]}

    @staticmethod
    def infer(ctx):
        _mvn_axes(ctx, len(ctx.shapes[0]))
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


@kernel("MeanVarianceNorm", "cpu")
class MeanVarianceNormCpu(Kernel):
    def setup(self, ctx):
        self.axes = _mvn_axes(ctx, len(ctx.input_shapes[0]))

    def run(self, inputs, outputs):
        x = inputs[0].astype(np.float32, copy=False)
        mean = x.mean(axis=self.axes, keepdims=True)
        std = np.sqrt(np.square(x - mean).mean(axis=self.axes, keepdims=True))
        np.copyto(outputs[0], (x - mean) / (std + 1e-9), casting="unsafe")
