"""CumProd: running product along arg `axis` (ONNX CumProd), optionally exclusive and/or reversed.

Args: axis (resolved at convert), exclusive (0), reverse (0). Layout ANY.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.cumsum import cumulative
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("CumProd", layout=Layout.ANY)
class CumProd(OpSpec):
    attrs = {"axis": 0, "exclusive": 0, "reverse": 0}

    @staticmethod
    def infer(ctx):
        normalize_axis(ctx.arg("axis"), len(ctx.shapes[0]))
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


@kernel("CumProd", "cpu")
class CumProdCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.exclusive = bool(ctx.arg("exclusive"))
        self.reverse = bool(ctx.arg("reverse"))

    def run(self, inputs, outputs):
        np.copyto(outputs[0], cumulative(inputs[0], self.axis, self.exclusive, self.reverse, product=True))
