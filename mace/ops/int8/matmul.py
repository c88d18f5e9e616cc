"""MatMul, int8: (a_q - a_zero) @ (b_q - b_zero), numpy's batched rules, requantized.

Both operands are per-tensor uint8: a constant b is a weight quantized per tensor
(weight_inputs {1: None}), a constant a gets activation parameters, and activations
keep their own. One multiplier a_scale * b_scale / out_scale for every element.
Constant operands are centred and transposed once at load; the GEMM is exact in float64.
"""
import numpy as np

from mace.ops.int8._base import Int8Kernel
from mace.ops.int8._gemm import OutputStage, centred
from mace.ops.matmul import _operand
from mace.ops.registry import LOAD, kernel


@kernel("MatMul", "int8")
class MatMulInt8(Int8Kernel):
    weight_inputs = {1: None}

    @staticmethod
    def check(ctx) -> str | None:
        if ctx.stage != LOAD:
            return None   # any mix of constant and activation operands (all per-tensor uint8)
        if all(d == np.uint8 for d in ctx.input_dtypes[:2]):
            return None
        return "operands are " + " and ".join(str(np.dtype(d)) for d in ctx.input_dtypes[:2]) + ", not both uint8"

    def setup(self, ctx):
        flags = (bool(ctx.arg("transpose_a")), bool(ctx.arg("transpose_b")))
        self.operands = []   # per input: a constant centred matrix, or a run-time centring plan
        for i, transpose in enumerate(flags):
            p, const = ctx.input_quant[i], ctx.consts[i]
            if const is not None:
                self.operands.append(np.ascontiguousarray(_operand(centred(const, p), transpose)))
            else:
                buf = np.empty(ctx.input_shapes[i])
                self.operands.append((buf, _operand(buf, transpose), np.float64(p.zero_point)))
        self.acc = np.empty(ctx.output_shapes[0])
        self.stage = OutputStage(ctx)

    def run(self, inputs, outputs):
        a, b = (self._centred(op, x) for op, x in zip(self.operands, inputs))
        if self.acc.ndim:
            np.matmul(a, b, out=self.acc)
        else:
            self.acc[...] = np.matmul(a, b)
        self.stage(self.acc, outputs[0])

    @staticmethod
    def _centred(operand, x):
        if isinstance(operand, np.ndarray):
            return operand
        buf, view, zero = operand
        np.subtract(x, zero, out=buf)
        return view
