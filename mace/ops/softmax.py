"""Softmax along arg `axis` (default -1); `use_log: 1` gives LogSoftmax.

opset < 13 ONNX semantics (flatten from axis) are rewritten by the frontend
into Reshape + Softmax(-1) + Reshape, so this op is always one axis.
"""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis, permute_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("Softmax", layout=Layout.AXIS)
class Softmax(OpSpec):
    attrs = {"axis": -1, "use_log": 0}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]

    @staticmethod
    def remap_axes(op, perm, ranks):
        set_arg(op, "axis", permute_axis(get_arg(op, "axis", -1), perm, ranks[0]))
        return perm


@kernel("Softmax", "cpu")
class SoftmaxCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.log = bool(ctx.arg("use_log"))

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        # A fully masked row (all -inf) gives NaN, as in onnxruntime: -inf - -inf is NaN.
        with np.errstate(invalid="ignore", divide="ignore"):
            np.subtract(x, x.max(axis=self.axis, keepdims=True), out=out)
            if self.log:
                out -= np.log(np.exp(out).sum(axis=self.axis, keepdims=True))
            else:
                np.exp(out, out=out)
                out /= out.sum(axis=self.axis, keepdims=True)
