"""Transpose: arg `dims` is the permutation (output axis i = input axis dims[i])."""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("Transpose", layout=Layout.ANY)
class Transpose(OpSpec):
    attrs = {"dims": []}

    @staticmethod
    def infer(ctx):
        dims = ctx.arg("dims") or list(range(len(ctx.shapes[0])))[::-1]
        return [(tuple(ctx.shapes[0][d] for d in dims), ctx.dtypes[0])]


@kernel("Transpose", "cpu")
class TransposeCpu(Kernel):
    def setup(self, ctx):
        self.dims = ctx.arg("dims") or list(range(len(ctx.input_shapes[0])))[::-1]

    def run(self, inputs, outputs):
        np.copyto(outputs[0], inputs[0].transpose(self.dims))
