"""LpNorm: x / ||x||_p along arg `axis`, p = 1 or 2 (ONNX LpNormalization); an all-zero row stays 0.

Layout ANY: the axis counts in the framework's layout.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("LpNorm", layout=Layout.ANY)
class LpNorm(OpSpec):
    attrs = {"axis": -1, "p": 2}

    @staticmethod
    def infer(ctx):
        normalize_axis(ctx.arg("axis"), len(ctx.shapes[0]))
        if int(ctx.arg("p")) not in (1, 2):
            raise ValueError(f"LpNorm '{ctx.op.name}': p must be 1 or 2, got {ctx.arg('p')}")
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


@kernel("LpNorm", "cpu")
class LpNormCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.p = int(ctx.arg("p"))

    def run(self, inputs, outputs):
        x = inputs[0]
        norm = np.linalg.norm(x, ord=self.p, axis=self.axis, keepdims=True) if self.p == 2 else \
            np.abs(x).sum(axis=self.axis, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):  # an all-zero row stays 0
            y = np.where(norm == 0, 0, x / norm)
        np.copyto(outputs[0], y, casting="unsafe")
