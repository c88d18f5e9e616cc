"""ArgMax: int64 index of the largest (arg `argmin`: smallest) value along arg `axis`.

Args: axis, keepdims (default 1), select_last_index (ties go to the last
index instead of the first), argmin. Layout AXIS: remap_axes moves `axis`.
"""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis, permute_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("ArgMax", layout=Layout.AXIS)
class ArgMax(OpSpec):
    attrs = {"argmin": 0, "axis": 0, "keepdims": 1, "select_last_index": 0}

    @staticmethod
    def infer(ctx):
        shape = list(ctx.shapes[0])
        axis = normalize_axis(ctx.arg("axis"), len(shape))
        if ctx.arg("keepdims"):
            shape[axis] = 1
        else:
            del shape[axis]
        return [(tuple(shape), np.int64)]

    @staticmethod
    def remap_axes(op, perm, ranks):
        axis = normalize_axis(get_arg(op, "axis", 0), ranks[0])
        set_arg(op, "axis", permute_axis(axis, perm, ranks[0]))
        if get_arg(op, "keepdims", 1):
            return perm
        kept = [p for p in perm if p != axis]  # logical axes in stored order
        return tuple(sorted(kept).index(p) for p in kept)


@kernel("ArgMax", "cpu")
class ArgMaxCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.fn = np.argmin if ctx.arg("argmin") else np.argmax
        self.last = bool(ctx.arg("select_last_index"))
        self.dim = ctx.input_shapes[0][self.axis]

    def run(self, inputs, outputs):
        x = inputs[0]
        if self.last:  # numpy returns the first of equal values: search the flipped axis
            idx = self.dim - 1 - self.fn(np.flip(x, self.axis), axis=self.axis, keepdims=True)
        else:
            idx = self.fn(x, axis=self.axis, keepdims=True)
        np.copyto(outputs[0], idx.reshape(outputs[0].shape))
