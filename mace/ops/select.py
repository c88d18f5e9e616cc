"""Select: out = where(condition, x, y) with numpy broadcasting of all three (ONNX Where)."""
import numpy as np

from mace.ops._common import broadcast_shape
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("Select", layout=Layout.ELEMENTWISE)
class Select(OpSpec):
    attrs = {}

    @staticmethod
    def infer(ctx):
        return [(broadcast_shape(*ctx.shapes), np.result_type(ctx.dtypes[1], ctx.dtypes[2]))]


@kernel("Select", "cpu")
class SelectCpu(Kernel):
    def setup(self, ctx):
        self.cond = None if ctx.consts[0] is None else np.asarray(ctx.consts[0], np.bool_)

    def run(self, inputs, outputs):
        cond = self.cond if self.cond is not None else inputs[0].astype(np.bool_, copy=False)
        np.copyto(outputs[0], np.where(cond, inputs[1], inputs[2]), casting="unsafe")
