"""Quantized Eltwise: SUM, SUB, MEAN, PROD, MIN, MAX on uint8 inputs with their own
scales and zero points (numpy broadcasting; constant operands come quantized).

* SUM / SUB / MEAN: out = zo + floor((sum_i A_i (q_i - z_i) + 2**(S-1)) / 2**S), each A_i
  the integer nearest r_i * 2**S, r_i = s_i / s_out (negated for SUB's second input,
  divided by the count for MEAN), S the largest shift up to 46 that keeps every |A_i|
  within 30 bits. One rounding, half up, in integers only; the fast kernel
  (mace/ops/fast/int8/eltwise.py) computes it for two inputs with two vpmaddwd per 16
  elements (the multipliers' 15-bit halves).
* PROD: (a - za) * (b - zb) in int64, requantized by sa * sb / out_scale.
* MIN / MAX: each input rescaled to the output's parameters by a table, then min/max
  (requantizing is monotonic, so the order is kept).
A fused RELU / RELUX becomes the output clamp. Error against the float op on the
dequantized inputs: <= 0.5 output step, plus for SUM/SUB/MEAN the multipliers' rounding,
255 * 2**-(S+1) per input, at most 255 / 2**30 * max r_i ~ 2.4e-7 max r_i output steps:
within 1 output step. DIV and the rest stay float.
"""
import numpy as np

from mace.ir import quant_params as qp
from mace.ops.int8._base import Int8Kernel, float_consts, quantized_io, rescale_table
from mace.ops.registry import LOAD, kernel

ADDITIVE = ("SUM", "SUB", "MEAN")
SUPPORTED = ADDITIVE + ("PROD", "MIN", "MAX")
BINARY_ONLY = ("SUB", "PROD")
FUSED = ("", "NOOP", "RELU", "RELUX")
COEF_LIMIT = 1 << 30          # |A_i| < 2**30: two signed 15-bit halves (the fast kernel)
MAX_SHIFT = 46                # 2**(S-1) / 2**15 stays within int32 (the fast kernel's halves)
COEF_CAP = 1 << 40            # |A_i| beyond: every nonzero term saturates the output anyway


def additive_coefficients(ratios) -> tuple:
    """(A, S): integers A_i = rint(r_i * 2**S) for the largest S in [1, MAX_SHIFT] with every
    |A_i| < COEF_LIMIT (S = 1 where none is; |A_i| capped at COEF_CAP so that an absurd
    scale ratio cannot overflow int64)."""
    ratios = [np.float64(r) for r in ratios]
    shift = MAX_SHIFT
    while shift > 1 and max(abs(np.rint(r * 2.0 ** shift)) for r in ratios) >= COEF_LIMIT:
        shift -= 1
    return [int(np.clip(np.rint(r * 2.0 ** shift), -COEF_CAP, COEF_CAP)) for r in ratios], shift


@kernel("Eltwise", "int8")
class EltwiseInt8(Int8Kernel):
    output_range = "own"

    @staticmethod
    def check(ctx) -> str | None:
        if ctx.stage == LOAD:
            return quantized_io(ctx)
        kind = ctx.arg("type")
        if kind not in SUPPORTED:
            return f"Eltwise {kind} has no quantized form (only {', '.join(SUPPORTED)})"
        if kind in BINARY_ONLY and len(ctx.op.input) != 2:
            return f"Eltwise {kind} needs exactly 2 inputs, got {len(ctx.op.input)}"
        act = ctx.arg("activation")
        if act not in FUSED:
            return f"fused activation {act} has no quantized form (RELU/RELUX only)"
        return float_consts(ctx)

    def setup(self, ctx):
        self.kind = ctx.arg("type")
        p_out = ctx.output_quant[0]
        self.qmin, self.qmax = qp.activation_clamp(ctx.arg("activation"), p_out,
                                                   ctx.arg("max_limit"))
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
        out_scale = np.float64(ctx.output_quant[0].scale) * (n if self.kind == "MEAN" else 1)
        ratios = [np.float64(p.scale) / out_scale * (-1 if self.kind == "SUB" and i == 1 else 1)
                  for i, p in enumerate(ctx.input_quant)]
        self.coefs, self.shift = additive_coefficients(ratios)
        self.zeros = [int(p.zero_point) for p in ctx.input_quant]
        # constant operands: their terms once, now
        self.fixed = [None if c is None else a * (c.astype(np.int64) - z)
                      for a, c, z in zip(self.coefs, ctx.consts, self.zeros)]

    def run(self, inputs, outputs):
        out = outputs[0]
        if self.kind in ADDITIVE:
            acc = np.int64(1) << (self.shift - 1)
            for f, a, z, x in zip(self.fixed, self.coefs, self.zeros, inputs):
                acc = acc + (f if f is not None else a * (x.astype(np.int64) - z))
            res = (np.broadcast_to(acc, out.shape) >> self.shift) + self.zero_out
            np.copyto(out, np.clip(res, self.qmin, self.qmax), casting="unsafe")
            return
        if self.kind == "PROD":
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
