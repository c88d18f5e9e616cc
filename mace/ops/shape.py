"""Shape: the (static) shape of its input as int64, optionally sliced by `start`/`end`.

Folded to a constant during conversion, except the shape of a tensor whose length depends on
the data (NonMaxSuppression's rows, what is gathered by them): mark_ragged gives that op the
length tensor as input 1 and arg `ragged_axis`, and the kernel puts the length the run found
in place of that axis's planned bound (Paddle2ONNX's multiclass_nms3 sizes its TopK with it).
"""
import numpy as np

from mace.ops.registry import REQUIRED, Layout, OpSpec, SimpleKernel, kernel, register_op


def _slice(ctx_arg, shape):
    start, end = ctx_arg("start", 0), ctx_arg("end", None)
    return np.array(tuple(shape)[start:end], np.int64)


@register_op("Shape", layout=Layout.ANY)
class Shape(OpSpec):
    attrs = {"end": None, "ragged_axis": REQUIRED, "start": 0}

    @staticmethod
    def infer(ctx):
        return [((len(_slice(ctx.arg, ctx.shapes[0])),), np.int64)]


@kernel("Shape", "cpu")
class ShapeCpu(SimpleKernel):
    def compute(self, x, length=None):
        shape = list(self.ctx.input_shapes[0])
        if length is not None:
            shape[int(self.ctx.arg("ragged_axis"))] = int(np.asarray(length).reshape(-1)[0])
        return _slice(self.ctx.arg, shape)
