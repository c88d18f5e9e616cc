"""Concat: join inputs along arg `axis`."""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis, permute_axis
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("Concat", layout=Layout.AXIS)
class Concat(OpSpec):
    attrs = {"axis": REQUIRED}

    @staticmethod
    def infer(ctx):
        rank = len(ctx.shapes[0])
        axis = normalize_axis(ctx.arg("axis"), rank)
        out = list(ctx.shapes[0])
        out[axis] = sum(s[axis] for s in ctx.shapes)
        return [(tuple(out), np.result_type(*ctx.dtypes))]

    @staticmethod
    def remap_axes(op, perm, ranks):
        set_arg(op, "axis", permute_axis(get_arg(op, "axis"), perm, ranks[0]))
        return perm


@kernel("Concat", "cpu")
class ConcatCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.output_shapes[0]))

    def run(self, inputs, outputs):
        np.concatenate(inputs, axis=self.axis, out=outputs[0], casting="unsafe")
