"""Tile: repeat the input arg `repeats[i]` times along each axis i (numpy.tile).

Layout AXIS: remap_axes permutes `repeats` with the input's stored order.
"""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops.registry import REQUIRED, Layout, OpSpec, SimpleKernel, kernel, register_op


@register_op("Tile", layout=Layout.AXIS)
class Tile(OpSpec):
    attrs = {"repeats": REQUIRED}

    @staticmethod
    def infer(ctx):
        shape, reps = ctx.shapes[0], list(ctx.arg("repeats"))
        if len(reps) != len(shape) or any(r < 0 for r in reps):
            raise ValueError(f"Tile '{ctx.op.name}': repeats {reps} do not fit rank {len(shape)}")
        return [(tuple(d * r for d, r in zip(shape, reps)), ctx.dtypes[0])]

    @staticmethod
    def remap_axes(op, perm, ranks):
        reps = get_arg(op, "repeats")
        set_arg(op, "repeats", [reps[p] for p in perm])
        return perm


@kernel("Tile", "cpu")
class TileCpu(SimpleKernel):
    def compute(self, x):
        return np.tile(x, self.ctx.arg("repeats"))
