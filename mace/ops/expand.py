"""Expand: broadcast the input to arg `shape` (ONNX Expand, already resolved).

The frontend stores the final output shape (the broadcast of the input's shape
and ONNX's requested shape), so the kernel is a single broadcast copy. Layout
AXIS: when the rank does not grow, remap_axes permutes `shape`; a growing
rank falls back to the framework's layout.
"""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import broadcast_shape
from mace.ops.registry import REQUIRED, Layout, OpSpec, SimpleKernel, kernel, register_op


@register_op("Expand", layout=Layout.AXIS)
class Expand(OpSpec):
    attrs = {"shape": REQUIRED}

    @staticmethod
    def infer(ctx):
        try:
            out = broadcast_shape(ctx.shapes[0], ctx.arg("shape"))
        except ValueError:
            raise ValueError(f"Expand '{ctx.op.name}': cannot broadcast {tuple(ctx.shapes[0])} "
                             f"to {tuple(ctx.arg('shape'))}") from None
        return [(out, ctx.dtypes[0])]

    @staticmethod
    def remap_axes(op, perm, ranks):
        shape = get_arg(op, "shape")
        if len(shape) != ranks[0]:
            return None
        set_arg(op, "shape", [shape[p] for p in perm])
        return perm


@kernel("Expand", "cpu")
class ExpandCpu(SimpleKernel):
    def compute(self, x):
        return np.broadcast_to(x, self.ctx.output_shapes[0])
