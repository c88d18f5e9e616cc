"""PrefixSlice: the leading part of a constant table whose length follows an input's dimension.

Inputs: table, ref. Args: `axes` (of the table), `ref_axis` (of ref), `offset`. The output is
the table cut to ref.shape[ref_axis] + offset along each of `axes` (a position table taken to
the sequence length; a causal mask along both of its axes). convert writes it where a constant
folded at the converted shape is a prefix of the same constant at a longer one
(mace/transform/variable_shapes.py), so the model follows a variable dimension.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Layout, OpSpec, SimpleKernel, kernel, register_op


@register_op("PrefixSlice", layout=Layout.ANY)
class PrefixSlice(OpSpec):
    attrs = {"axes": REQUIRED, "offset": 0, "ref_axis": REQUIRED}

    @staticmethod
    def infer(ctx):
        table, ref = ctx.shapes
        n = ref[int(ctx.arg("ref_axis"))] + int(ctx.arg("offset"))
        shape = list(table)
        for axis in ctx.arg("axes"):
            if not 0 <= n <= table[axis]:
                raise ValueError(f"PrefixSlice '{ctx.op.name}': {n} entries asked of axis {axis}, "
                                 f"the table has {table[axis]} (beyond the range convert checked)")
            shape[axis] = n
        return [(tuple(shape), ctx.dtypes[0])]


@kernel("PrefixSlice", "cpu")
class PrefixSliceCpu(SimpleKernel):
    def compute(self, table, ref):
        return table[tuple(slice(0, n) for n in self.ctx.output_shapes[0])]
