"""GatherElements: out[i][j][k] = data[index[i][j][k]][j][k] along arg `axis` (ONNX GatherElements).

Inputs: data, indices (same rank as data; negative values count from the end). The output has
the indices' shape. Layout ANY.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.gather import wrap_indices
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("GatherElements", layout=Layout.ANY)
class GatherElements(OpSpec):
    attrs = {"axis": 0}

    @staticmethod
    def infer(ctx):
        data, idx = ctx.shapes[0], ctx.shapes[1]
        if len(data) != len(idx):
            raise ValueError(f"GatherElements '{ctx.op.name}': indices rank {len(idx)} differs from "
                             f"the data's {len(data)}")
        normalize_axis(ctx.arg("axis"), len(data))
        return [(tuple(idx), ctx.dtypes[0])]


@kernel("GatherElements", "cpu")
class GatherElementsCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.dim = ctx.input_shapes[0][self.axis]
        self.name = ctx.op.name

    def run(self, inputs, outputs):
        idx = wrap_indices(inputs[1], self.dim, self.name)
        np.copyto(outputs[0], np.take_along_axis(inputs[0], idx, axis=self.axis))
