"""FullyConnected, int8: y = (x_q - x_zero) @ (W_q - w_zero).T + bias_q, requantized.

Weight (O, K) quantized per output channel (axis 0), bias int32 (input 2). The centred
weight is transposed to (K, O) once at load; the GEMM is exact in float64.
"""
import numpy as np

from mace.ops.int8._gemm import OutputStage, WeightedInt8Kernel, centred
from mace.ops.registry import kernel


@kernel("FullyConnected", "int8")
class FullyConnectedInt8(WeightedInt8Kernel):
    def setup(self, ctx):
        wq = ctx.consts[1]
        o, k = wq.shape
        self.wt = np.ascontiguousarray(centred(wq, ctx.input_quant[1]).T)
        self.zero = self.input_zero(ctx)
        rows = int(np.prod(ctx.input_shapes[0][:-1], dtype=np.int64))
        self.xc = np.empty((rows, k))
        self.acc = np.empty((rows, o))
        self.stage = OutputStage(ctx, ctx.input_quant[1], o, self.bias_input)

    def run(self, inputs, outputs):
        np.subtract(inputs[0].reshape(self.xc.shape), self.zero, out=self.xc)
        np.matmul(self.xc, self.wt, out=self.acc)
        self.stage(self.acc, outputs[0].reshape(self.acc.shape))
