"""CumSum: running sum along arg `axis` (ONNX CumSum), optionally exclusive and/or reversed.

Args: axis (resolved at convert), exclusive (0), reverse (0). Layout ANY.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("CumSum", layout=Layout.ANY)
class CumSum(OpSpec):
    attrs = {"axis": 0, "exclusive": 0, "reverse": 0}

    @staticmethod
    def infer(ctx):
        normalize_axis(ctx.arg("axis"), len(ctx.shapes[0]))
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


def cumulative(x, axis, exclusive=False, reverse=False, product=False):
    """Running sum (or product) along `axis`; exclusive: y[i] covers x[:i] (the identity first)."""
    if reverse:
        x = np.flip(x, axis)
    y = (np.cumprod if product else np.cumsum)(x, axis=axis, dtype=x.dtype)
    if exclusive:
        y = np.roll(y, 1, axis=axis)
        np.moveaxis(y, axis, 0)[0] = 1 if product else 0
    return np.flip(y, axis) if reverse else y


@kernel("CumSum", "cpu")
class CumSumCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.exclusive = bool(ctx.arg("exclusive"))
        self.reverse = bool(ctx.arg("reverse"))

    def run(self, inputs, outputs):
        np.copyto(outputs[0], cumulative(inputs[0], self.axis, self.exclusive, self.reverse))
