"""Quantized Eltwise: SUM, SUB, MEAN, PROD, MIN, MAX on uint8 inputs with their own
scales and zero points (numpy broadcasting; constant operands come quantized).

* SUM / SUB / MEAN: every input is brought to one integer domain of step
  u = 2 * max(in scales) / 2**L (L = 20 bits for two inputs, one less per doubling of
  the input count so the int32 sum cannot overflow): term = requantize((q - z) << L,
  in_scale / (2 * max in_scale)). As q has 256 values this is a 256-entry int64 table
  per input (constant operands looked up once at load). The terms are added (SUB
  negates the second, MEAN divides by the count) and requantized by u / out_scale.
* PROD: (a - za) * (b - zb) in int64, requantized by sa * sb / out_scale.
* MIN / MAX: each input rescaled to the output's parameters by a table, then min/max
  (requantizing is monotonic, so the order is kept).
A fused RELU / RELUX becomes the output clamp. Error against the float op on the
dequantized inputs: <= 0.5 output step, plus for SUM/SUB/MEAN 0.5 u per input from
the intermediate domain (u / out_scale ~ 2**-19 unless the output's scale is
thousands of times finer than the inputs'): within 1 output step. DIV and the rest
stay float.
"""
import math

import numpy as np

from mace.ir import quant_params as qp
from mace.ir.args import get_arg
from mace.ops.int8._base import Int8Kernel, float_consts, rescale_table
from mace.ops.registry import kernel

ADDITIVE = ("SUM", "SUB", "MEAN")
SUPPORTED = ADDITIVE + ("PROD", "MIN", "MAX")
BINARY_ONLY = ("SUB", "PROD")
FUSED = ("", "NOOP", "RELU", "RELUX")
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


def left_shift_bits(n_inputs: int) -> int:
    """20 for two inputs; one bit less per doubling, so n * 255 * 2**(L-1) < 2**31."""
    return 21 - max(1, math.ceil(math.log2(max(n_inputs, 1))))


@kernel("Eltwise", "int8")
class EltwiseInt8(Int8Kernel):
    output_range = "own"

    @staticmethod
    def supports(op, graph):
        kind = get_arg(op, "type", "")
        if kind not in SUPPORTED:
            return f"Eltwise {kind} has no quantized form (only {', '.join(SUPPORTED)})"
        if kind in BINARY_ONLY and len(op.input) != 2:
            return f"Eltwise {kind} needs exactly 2 inputs, got {len(op.input)}"
        act = get_arg(op, "activation", "")
        if act not in FUSED:
            return f"fused activation {act} has no quantized form (RELU/RELUX only)"
        return float_consts(op, graph)

    def setup(self, ctx):
        self.kind = ctx.arg("type")
        p_out = ctx.output_quant[0]
        self.qmin, self.qmax = qp.activation_clamp(ctx.arg("activation", ""), p_out,
                                                   ctx.arg("max_limit", 0.0))
        self.zero_out = int(p_out.zero_point)
        if self.kind in ADDITIVE:
            self._setup_additive(ctx)
        elif self.kind == "PROD":
            a, b = ctx.input_quant
            self.zeros = [int(a.zero_point), int(b.zero_point)]
            real = np.float64(a.scale) * np.float64(b.scale) / np.float64(p_out.scale)
            self.mult, self.shift = qp.quantize_multiplier(real)
        else:
            self.tables = [rescale_table(p, p_out, self.qmin, self.qmax) for p in ctx.input_quant]
            self.tables = [t if t is not None else np.arange(256, dtype=np.uint8)
                           for t in self.tables]

    def _setup_additive(self, ctx):
        n = len(ctx.input_quant)
        bits = left_shift_bits(n)
        top = 2 * max(np.float64(p.scale) for p in ctx.input_quant)
        codes = np.arange(256, dtype=np.int64)
        self.tables = []
        for i, p in enumerate(ctx.input_quant):
            m, s = qp.quantize_multiplier(np.float64(p.scale) / top)
            table = np.empty(256, np.int64)
            qp.requantize((codes - int(p.zero_point)) << bits, m, s, 0, table, INT32_MIN, INT32_MAX)
            if self.kind == "SUB" and i == 1:
                np.negative(table, out=table)
            self.tables.append(table)
        # constant operands: their terms once, now
        self.fixed = [None if c is None else np.take(t, c) for t, c in zip(self.tables, ctx.consts)]
        unit = top / float(1 << bits)
        real = unit / np.float64(ctx.output_quant[0].scale) / (n if self.kind == "MEAN" else 1)
        self.mult, self.shift = qp.quantize_multiplier(real)

    def run(self, inputs, outputs):
        out = outputs[0]
        if self.kind in ADDITIVE:
            terms = [f if f is not None else np.take(t, x)
                     for f, t, x in zip(self.fixed, self.tables, inputs)]
            acc = terms[0] + terms[1] if len(terms) > 1 else np.array(terms[0], np.int64)
            for term in terms[2:]:
                acc = acc + term
            acc = np.broadcast_to(acc, out.shape).astype(np.int64)
        elif self.kind == "PROD":
            a, b = (np.subtract(x, z, dtype=np.int64) for x, z in zip(inputs, self.zeros))
            acc = np.broadcast_to(a * b, out.shape).astype(np.int64)
        else:
            pick = np.minimum if self.kind == "MIN" else np.maximum
            res = np.take(self.tables[0], inputs[0])
            for table, x in zip(self.tables[1:], inputs[1:]):
                res = pick(res, np.take(table, x))
            np.copyto(out, np.broadcast_to(res, out.shape))
            return
        qp.requantize(acc, self.mult, self.shift, self.zero_out, out, self.qmin, self.qmax)
