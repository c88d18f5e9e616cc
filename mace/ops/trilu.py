"""Trilu: keep the upper (arg `upper`=1) or lower triangle of the last two axes, from diagonal `k`.

Args: upper (1), k (0; resolved at convert: positive moves the diagonal up/right).
Causal attention masks are built with it. Layout ANY.
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("Trilu", layout=Layout.ANY)
class Trilu(OpSpec):
    attrs = {"k": 0, "upper": 1}

    @staticmethod
    def infer(ctx):
        if len(ctx.shapes[0]) < 2:
            raise ValueError(f"Trilu '{ctx.op.name}': the input needs rank >= 2, got {list(ctx.shapes[0])}")
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


@kernel("Trilu", "cpu")
class TriluCpu(Kernel):
    def setup(self, ctx):
        rows, cols = ctx.input_shapes[0][-2:]
        k = int(ctx.arg("k"))
        i, j = np.ogrid[:rows, :cols]
        self.keep = (j - i >= k) if ctx.arg("upper") else (j - i <= k)

    def run(self, inputs, outputs):
        np.copyto(outputs[0], np.where(self.keep, inputs[0], np.zeros((), inputs[0].dtype)))
