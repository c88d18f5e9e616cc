"""What every int8 kernel shares: the class conventions (mace/ops/int8/__init__.py) and
the 256-entry rescale table that requantizes uint8 values from one scale to another."""
from __future__ import annotations

import numpy as np

from mace.ir import quant_params as qp
from mace.ops._common import apply_activation
from mace.ops.registry import LOAD, Kernel

UINT8_LEVELS = 256


class Int8Kernel(Kernel):
    """Defaults of an int8 kernel class for the quantize pass and the engine."""

    weight_inputs: dict = {}
    bias_input = None
    output_range = "own"

    @staticmethod
    def check(ctx) -> str | None:
        """At load: why the node's tensors are not this kernel's (quantized uint8: float nodes
        of a quantized model fall through to the float kernels); at convert, asked by the
        quantize pass of a float op: why the op cannot be quantized onto this kernel (any op
        can here; subclasses name what they refuse)."""
        return quantized_io(ctx) if ctx.stage == LOAD else None

    @classmethod
    def requantizes(cls, op) -> bool:
        """Whether the kernel writes op's output in any parameters at no extra cost (it
        requantizes anyway): a Concat's input made by it can take the Concat's range
        (mace/transform/passes/quantize.py shared_concat_ranges)."""
        return cls.output_range == "own"

    @staticmethod
    def input_zero(ctx, index: int = 0) -> np.float64:
        return np.float64(ctx.input_quant[index].zero_point)


def quantized_io(ctx) -> str | None:
    """Why input 0 and the outputs are not quantized uint8 tensors, or None. A uint8 tensor
    without quantization (a float op's integer input) is not an int8 kernel's."""
    if np.dtype(ctx.input_dtypes[0]) != np.uint8:
        return f"input 0 is {np.dtype(ctx.input_dtypes[0])}, not quantized uint8"
    if not ctx.input_quant or ctx.input_quant[0] is None:
        return "input 0 is uint8 without quantization parameters"
    if not ctx.output_quant or any(p is None for p in ctx.output_quant):
        return "an output has no quantization parameters"
    return None


def float_consts(ctx) -> str | None:
    """Reason when a constant input is not float (it would stay unquantized), else None."""
    for t, c in zip(ctx.op.input, ctx.consts):
        if c is not None and c.dtype.kind != "f":
            return f"constant input {t} is {c.dtype}, not float"
    return None


def same_params(a: qp.QuantParams, b: qp.QuantParams) -> bool:
    return float(a.scale) == float(b.scale) and int(a.zero_point) == int(b.zero_point)


def rescale_table(p_in: qp.QuantParams, p_out: qp.QuantParams, qmin: int = qp.UINT8_MIN,
                  qmax: int = qp.UINT8_MAX) -> np.ndarray | None:
    """uint8 -> uint8 table requantizing p_in's integers to p_out's, clamped to [qmin, qmax].

    None when the map is the identity. Built with the integer requantize, so applying
    it equals requantizing every element.
    """
    if same_params(p_in, p_out) and qmin <= qp.UINT8_MIN and qmax >= qp.UINT8_MAX:
        return None
    m, shift = qp.quantize_multiplier(np.float64(p_in.scale) / np.float64(p_out.scale))
    acc = np.arange(UINT8_LEVELS, dtype=np.int64) - int(p_in.zero_point)
    table = np.empty(UINT8_LEVELS, np.uint8)
    return qp.requantize(acc, m, shift, int(p_out.zero_point), table, qmin, qmax)


def apply_table(table, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = table[x] (x may be out itself); a plain copy when table is None."""
    if table is None:
        if out is not x:
            np.copyto(out, x)
    else:
        np.take(table, x, out=out)   # numpy reads x into an index array before writing out
    return out


# Fused activations that are no clamp: the int8 GEMM-like kernels (conv, depthwise, FC, deconv)
# requantize the accumulator to the range the model gives the op's output BEFORE the activation
# (op arg PRE_ACTIVATION_ARG: [min, max]) and map each of those codes through one 256-entry
# table to the output's codes, as TFLite's and onnxruntime's QDQ semantics do (the activation
# computed in float between the two grids). A model without the arg (converted before, or a
# calibrated one whose pre-activation tensor was fused away) keeps such ops float.
TABLE_ACTIVATIONS = ("LEAKYRELU", "SIGMOID", "TANH", "ELU", "HARDSIGMOID", "HARDSWISH", "SWISH")
PRE_ACTIVATION_ARG = "pre_activation_range"


def pre_activation_params(ctx) -> qp.QuantParams | None:
    """The uint8 grid of the op's output before its fused activation, or None when the op
    records none (PRE_ACTIVATION_ARG)."""
    rng = ctx.arg(PRE_ACTIVATION_ARG, None)
    if not rng or len(rng) != 2:
        return None
    return qp.activation_params(float(rng[0]), float(rng[1]))


def activation_table(kind: str, p_in: qp.QuantParams, p_out: qp.QuantParams, alpha: float = 0.0,
                     max_limit: float = 0.0) -> np.ndarray:
    """uint8 -> uint8: table[q] = p_out's code of activation(p_in's real value of q).

    As a Q/DQ model runs it (DequantizeLinear, the float op, QuantizeLinear): the code
    dequantized in float32, the activation in float32 (the float kernel's
    apply_activation), divided by p_out's scale in float32, rounded half to even, plus the
    zero point, saturated to [0, 255]."""
    codes = np.arange(UINT8_LEVELS, dtype=np.float32)
    x = (codes - np.float32(p_in.zero_point)) * np.float32(p_in.scale)
    with np.errstate(over="ignore", invalid="ignore"):
        y = apply_activation(x, kind, float(alpha), float(max_limit)).astype(np.float32)
        q = np.rint(y / np.float32(p_out.scale)) + np.float32(p_out.zero_point)
    q = np.nan_to_num(q, nan=float(p_out.zero_point))
    return np.clip(q, qp.UINT8_MIN, qp.UINT8_MAX).astype(np.uint8)
