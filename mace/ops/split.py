"""Split: cut the input along arg `axis` into pieces of sizes arg `split` (one per output).

The frontend resolves equal splits into explicit sizes. Layout AXIS: remap_axes
moves `axis`.
"""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis, permute_axis
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("Split", layout=Layout.AXIS)
class Split(OpSpec):
    attrs = {"axis": 0, "split": REQUIRED}

    @staticmethod
    def infer(ctx):
        shape = ctx.shapes[0]
        axis = normalize_axis(ctx.arg("axis"), len(shape))
        sizes = list(ctx.arg("split"))
        if sum(sizes) != shape[axis] or len(sizes) != len(ctx.op.output):
            raise ValueError(f"Split '{ctx.op.name}': sizes {sizes} do not cut axis {axis} "
                             f"of {tuple(shape)} into {len(ctx.op.output)} outputs")
        return [(tuple(shape[:axis]) + (n,) + tuple(shape[axis + 1:]), ctx.dtypes[0])
                for n in sizes]

    @staticmethod
    def remap_axes(op, perm, ranks):
        set_arg(op, "axis", permute_axis(get_arg(op, "axis", 0), perm, ranks[0]))
        return perm


@kernel("Split", "cpu")
class SplitCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.cuts = np.cumsum(ctx.arg("split"))[:-1]

    def run(self, inputs, outputs):
        for out, piece in zip(outputs, np.split(inputs[0], self.cuts, axis=self.axis)):
            np.copyto(out, piece)
