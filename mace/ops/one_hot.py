"""OneHot: `values[1]` where the index matches, `values[0]` elsewhere, on a new axis of size `depth`.

Inputs: indices (negative ones count from depth), values ([off, on]; its dtype is the output's).
Args: depth (resolved at convert), axis (-1: the new axis is last). Out-of-range indices give
an all-off row, as ONNX says. Layout ANY.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("OneHot", layout=Layout.ANY)
class OneHot(OpSpec):
    attrs = {"axis": -1, "depth": REQUIRED}

    @staticmethod
    def infer(ctx):
        shape = list(ctx.shapes[0])
        axis = normalize_axis(ctx.arg("axis"), len(shape) + 1)
        shape.insert(axis, int(ctx.arg("depth")))
        return [(tuple(shape), ctx.dtypes[1])]


@kernel("OneHot", "cpu")
class OneHotCpu(Kernel):
    def setup(self, ctx):
        self.depth = int(ctx.arg("depth"))
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]) + 1)

    def run(self, inputs, outputs):
        idx, values = np.asarray(inputs[0]).astype(np.int64), np.asarray(inputs[1]).reshape(-1)
        idx = np.where(idx < 0, idx + self.depth, idx)
        hot = np.expand_dims(idx, self.axis) == np.arange(self.depth).reshape(
            [-1 if a == self.axis else 1 for a in range(idx.ndim + 1)])
        np.copyto(outputs[0], np.where(hot, values[1], values[0]))
