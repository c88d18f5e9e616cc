"""Hardmax: 1 at the first largest value along arg `axis`, 0 elsewhere (ONNX Hardmax).

Layout ANY: the axis counts in the framework's layout. (Opsets < 13 flatten the trailing axes
first; the ONNX frontend adds the reshapes, as for Softmax.)
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("Hardmax", layout=Layout.ANY)
class Hardmax(OpSpec):
    attrs = {"axis": -1}

    @staticmethod
    def infer(ctx):
        normalize_axis(ctx.arg("axis"), len(ctx.shapes[0]))
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


@kernel("Hardmax", "cpu")
class HardmaxCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        best = np.expand_dims(np.argmax(x, axis=self.axis), self.axis)
        out[...] = 0
        np.put_along_axis(out, best, 1, axis=self.axis)
