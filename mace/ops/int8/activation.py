"""Quantized Activation: RELU, RELUX (ReLU6: clip at max_limit) and CLIP, as a clamp.

The clamp bounds are the output's integers for 0.0 / max_limit (activation_clamp;
CLIP: its min too). Output range "input": without a range of its own the output
keeps the input's parameters and the op is a clamp of the codes, exact up to the
bound itself being rounded to a code (<= 0.5 step). With its own range, one
256-entry table requantizes and clamps (<= 0.5 output step against the float op
on the dequantized input). The activations that are no clamp (TABLE_ACTIVATIONS: HARDSWISH,
HARDSIGMOID, SIGMOID, TANH, SWISH, LEAKYRELU, ELU) are one 256-entry table too: each input
code dequantized, the activation in float32, quantized to the output's grid, as a Q/DQ model
runs DequantizeLinear -> op -> QuantizeLinear (mace/ops/int8/_base.py activation_table);
their output should have a range of its own (a Q/DQ pair, calibration), else it keeps the
input's grid. Others (PRELU, GELU, ...) stay float: check() says why.
"""
import numpy as np

from mace.ir import quant_params as qp
from mace.ops.int8._base import (TABLE_ACTIVATIONS, Int8Kernel, activation_table, apply_table, quantized_io,
                                 rescale_table)
from mace.ops.registry import LOAD, kernel

CLAMPS = ("RELU", "RELUX", "CLIP")


def clamp_codes(kind, p: qp.QuantParams, alpha: float, max_limit: float) -> tuple:
    """(qmin, qmax) of the clamp in p's integers."""
    if kind != "CLIP":
        return qp.activation_clamp(kind, p, max_limit)
    code = lambda v: int(p.zero_point) + int(np.rint(v / np.float64(p.scale)))  # noqa: E731
    return (max(qp.UINT8_MIN, code(alpha)), min(qp.UINT8_MAX, code(max_limit)))


@kernel("Activation", "int8")
class ActivationInt8(Int8Kernel):
    output_range = "input"

    @staticmethod
    def check(ctx) -> str | None:
        if ctx.stage == LOAD:
            return quantized_io(ctx)
        kind = ctx.arg("activation")
        if kind not in CLAMPS + TABLE_ACTIVATIONS or len(ctx.op.input) != 1:
            return f"activation {kind} has no quantized form (only {', '.join(CLAMPS + TABLE_ACTIVATIONS)})"
        return None

    def setup(self, ctx):
        p_out = ctx.output_quant[0]
        kind = ctx.arg("activation")
        if kind in TABLE_ACTIVATIONS:
            self.table = activation_table(kind, ctx.input_quant[0], p_out,
                                          ctx.arg("activation_coefficient"), ctx.arg("max_limit"))
            return
        qmin, qmax = clamp_codes(ctx.arg("activation"), p_out,
                                 ctx.arg("activation_coefficient"), ctx.arg("max_limit"))
        self.table = rescale_table(ctx.input_quant[0], p_out, qmin, qmax)

    def run(self, inputs, outputs):
        apply_table(self.table, inputs[0], outputs[0])
