"""FullyConnected: y = x @ W.T + bias, then a fused activation.

Inputs: x (N, K), weight (O, K) constant, optional bias (O). Gemm and MatMul
with a constant right-hand side become this op. The kernel multiplies by the
transposed view W.T (BLAS reads it as a transposed operand): no copy at load,
so the weight is held once (VGG-19's first FC weight alone is 411 MB).
"""
import numpy as np

from mace.ops._common import activation_args, apply_activation
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op


@register_op("FullyConnected", layout=Layout.ANY)
class FullyConnected(OpSpec):
    attrs = {**FUSED_ACTIVATION}

    @staticmethod
    def infer(ctx):
        x, w = ctx.shapes[0], ctx.shapes[1]
        if x[-1] != w[1]:
            raise ValueError(f"FullyConnected '{ctx.op.name}': input has {x[-1]} features, "
                             f"weight expects {w[1]}")
        return [(tuple(x[:-1]) + (w[0],), ctx.dtypes[0])]


@kernel("FullyConnected", "cpu")
class FullyConnectedCpu(Kernel):
    uses_blas = True

    def setup(self, ctx):
        self.wt = np.asarray(ctx.consts[1], np.float32).T   # a view unless the dtype differs
        self.bias = None if len(ctx.consts) < 3 or ctx.consts[2] is None else \
            np.asarray(ctx.consts[2], np.float32)
        self.act = activation_args(ctx)

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        np.matmul(x.reshape(-1, x.shape[-1]), self.wt, out=out.reshape(-1, out.shape[-1]))
        if self.bias is not None:
            out += self.bias
        apply_activation(out, **self.act)
