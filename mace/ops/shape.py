"""Shape: the (static) shape of its input as int64, optionally sliced by `start`/`end`.

Always folded to a constant during conversion; the kernel exists for completeness.
"""
import numpy as np

from mace.ops.registry import Layout, OpSpec, SimpleKernel, kernel, register_op


def _slice(ctx_arg, shape):
    start, end = ctx_arg("start", 0), ctx_arg("end", None)
    return np.array(tuple(shape)[start:end], np.int64)


@register_op("Shape", layout=Layout.ANY)
class Shape(OpSpec):
    @staticmethod
    def infer(ctx):
        return [((len(_slice(ctx.arg, ctx.shapes[0])),), np.int64)]


@kernel("Shape", "cpu")
class ShapeCpu(SimpleKernel):
    def compute(self, x):
        return _slice(self.ctx.arg, self.ctx.input_shapes[0])
