"""What the GEMM-like int8 kernels share: centring, the output stage, what they refuse.

Every kernel here computes, per output channel c,

    acc[c] = sum((x_q - x_zero) * (w_q - w_zero[c])) + bias_q[c]

as float64: each factor is an integer of magnitude <= 255 and every partial sum stays
far below 2^53, so float64 BLAS is exact in any order and equals the int32 sum (see
mace/ir/quant_params.py). Inputs are centred (zero point subtracted) before the GEMM,
so a pad cell of 0.0 is the input zero point, i.e. real 0.0. The accumulator then
goes through params.requantize with multiplier in_scale * w_scale[c] / out_scale,
clamped for a fused RELU/RELUX. A fused activation that is no clamp (TABLE_ACTIVATIONS:
HARDSWISH, SIGMOID, ...) requantizes to the op's pre-activation grid (its arg
pre_activation_range) and then maps each code through a 256-entry table to the output's grid
(mace/ops/int8/_base.py activation_table).
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg
from mace.ir.quant_params import activation_clamp, quantize_multiplier, requantize
from mace.ops.int8._base import (PRE_ACTIVATION_ARG, TABLE_ACTIVATIONS, Int8Kernel, activation_table,
                                 apply_table, pre_activation_params, quantized_io)
from mace.ops.registry import LOAD

FUSABLE = ("", "NOOP", "RELU", "RELUX")


def gemm_reason(ctx, const_inputs=()) -> str | None:
    """Why ctx's op cannot run quantized (a fused activation or a non-constant weight), or None."""
    op = ctx.op
    act = get_arg(op, "activation", "") or ""
    if act in TABLE_ACTIVATIONS:
        if pre_activation_params(ctx) is None:
            return (f"fused activation {act} needs the range before it ({PRE_ACTIVATION_ARG}: a Q/DQ "
                    f"pair or FakeQuant between the op and the activation)")
    elif act not in FUSABLE:
        return f"fused activation {act} has no quantized form (RELU/RELUX only)"
    for i in const_inputs:
        if i < len(op.input) and ctx.consts[i] is None:
            return f"input {i} ({op.input[i]}) is not constant"
    return None


def centred(q: np.ndarray, p) -> np.ndarray:
    """float64 q - zero_point, the zero point per channel along p.axis when per-channel."""
    zero = p.broadcast(np.asarray(p.zero_point, np.float64), q.ndim)
    return np.asarray(q, np.float64) - zero


def channel_scales(p, channels: int) -> np.ndarray:
    """p's scale for each of `channels` outputs: one per-tensor scale repeated, or the
    per-channel scales tiled (grouped Deconv2D: C_out / group scales, repeated per group)."""
    scale = np.asarray(p.scale, np.float64).reshape(-1)
    return np.tile(scale, channels // scale.size)


class WeightedInt8Kernel(Int8Kernel):
    """An op with a constant weight (input 1, per-channel on axis 0) and an optional int32 bias
    (input 2): Conv2D, DepthwiseConv2d, Deconv2D, FullyConnected."""

    weight_inputs = {1: 0}
    bias_input = 2

    @staticmethod
    def check(ctx) -> str | None:
        return quantized_io(ctx) if ctx.stage == LOAD else gemm_reason(ctx, const_inputs=(1, 2))


class OutputStage:
    """acc (rows, C) float64 -> uint8 output: + bias, requantize per channel, fused clamp.

    `w_params` None means a per-tensor product of input 0 and input 1 (MatMul): one
    multiplier for every element, and `acc` may have any shape.
    """

    def __init__(self, ctx, w_params=None, channels: int | None = None, bias_index=None):
        in_scale = np.float64(ctx.input_quant[0].scale)
        out = ctx.output_quant[0]
        w = w_params if w_params is not None else ctx.input_quant[1]
        w_scale = channel_scales(w, channels) if channels else np.float64(w.scale)
        act = ctx.arg("activation", "") or ""
        # a table activation: requantize to the pre-activation grid, then one lookup per byte
        self.table = None
        if act in TABLE_ACTIVATIONS:
            pre = pre_activation_params(ctx)
            self.table = activation_table(act, pre, out, ctx.arg("activation_coefficient", 0.0),
                                          ctx.arg("max_limit", 0.0))
            out, act = pre, ""
        self.multiplier, self.shift = quantize_multiplier(in_scale * w_scale / np.float64(out.scale))
        self.zero = int(out.zero_point)
        self.qmin, self.qmax = activation_clamp(act, out, float(ctx.arg("max_limit", 0.0)))
        has_bias = bias_index is not None and bias_index < len(ctx.consts)
        bias = ctx.consts[bias_index] if has_bias else None
        self.bias = None if bias is None else np.asarray(bias, np.float64)

    def __call__(self, acc: np.ndarray, out: np.ndarray) -> None:
        if self.bias is not None:
            acc += self.bias                  # int32 bias into integer-valued float64: exact
        if np.ndim(self.multiplier) == 0:     # per tensor: any shape (a 0-d MatMul too)
            acc, out = acc.reshape(-1), out.reshape(-1)
        requantize(acc, self.multiplier, self.shift, self.zero, out, self.qmin, self.qmax)
        if self.table is not None:
            apply_table(self.table, out, out)
