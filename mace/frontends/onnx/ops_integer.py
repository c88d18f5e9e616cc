"""ONNX dynamic quantization (onnxruntime's quantize_dynamic): ConvInteger, and the
com.microsoft ops onnxruntime's graph optimizer fuses its MatMuls into (DynamicQuantizeMatMul,
MatMulIntegerToFloat) -> float ops.

quantize_dynamic writes each Conv as DynamicQuantizeLinear(x) -> ConvInteger(xq, w, x_zp, w_zp)
-> Cast(float) -> Mul(x_scale * w_scale) (+ Add bias), each MatMul the same with MatMulInteger
(ops_quant.py: exact reference kernels). As with the QOperator ops (ops_qlinear.py), the
integer convolution runs as the float Conv it stands for:

* ConvInteger: the float Conv of (x - x_zero_point) and the constant (w - w_zero_point) (per
  tensor, or per output channel), rounded and cast to int32. Every operand is an integer, so
  the float sum is the integer result while partial sums stay below 2^24 (about 256 products
  of full-range operands); beyond, within float32 rounding (a relative 1e-7), which the Cast
  and the scale product that follow carry into the float output.
* DynamicQuantizeMatMul (A float, B int8/uint8 constant, b_scale, b_zero_point, bias):
  DynamicQuantize(A) (onnxruntime's scale/zero-point formula and its round-half-to-even),
  then MatMulInteger, Cast, times a_scale * b_scale, plus bias: onnxruntime's own sequence.
* MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias): the
  MatMulInteger, Cast, scale product and bias as above.
* DynamicQuantizeLSTM (quantize_dynamic's LSTM: W [D, input, 4H] and R [D, H, 4H] as int8, one
  scale per direction or per gate column): the float LSTM over the dequantized W and R. Not
  onnxruntime's integers: onnxruntime also quantizes X and each step's h dynamically inside its
  kernel, which this float LSTM does not repeat; the difference is that rounding (measured in
  tests/quantize/test_dynamic_quantization.py).
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from mace.frontends.onnx.ops_qlinear import _float_op
from mace.frontends.onnx.ops_quant import _fail
from mace.frontends.onnx.registry import onnx_op

# the com.microsoft ops this module maps (frontend.py accepts them)
DYNAMIC_MICROSOFT = frozenset({"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLSTM"})


def _as_float(ctx, node, name, what) -> str:
    out = ctx.temp(node, f"{what}_float")
    ctx.add("Cast", node, [name], [out], name=out, to="float32")
    return out


def _centred_input(ctx, node, x, zero, what) -> str:
    """float(x) - float(zero): the zero point is a run-time scalar (DynamicQuantizeLinear's)."""
    xf = _as_float(ctx, node, x, what)
    if zero is None:
        return xf
    value = ctx.const(zero)
    if value is not None and np.size(value) != 1:
        raise _fail(node, ctx, f"{what}'s zero point must be one value (per tensor)")
    if value is not None:
        zf = ctx.add_const(ctx.temp(node, f"{what}_zero"), np.float32(np.asarray(value).reshape(())))
    else:
        zf = _as_float(ctx, node, zero, f"{what}_zero")
    out = ctx.temp(node, f"{what}_centred")
    ctx.add("Eltwise", node, [xf, zf], [out], name=out, type="SUB")
    return out


def _centred_weight(ctx, node, w, zero, axis) -> np.ndarray:
    """Constant integers minus their zero point (per tensor or along `axis`), as float32."""
    value = ctx.const(w)
    if value is None:
        raise _fail(node, ctx, "the weight must be a constant initializer")
    z = np.zeros((), np.int64) if zero is None else ctx.const(zero)
    if z is None:
        raise _fail(node, ctx, "the weight's zero point must be constant")
    z = np.asarray(z).astype(np.int64)
    if z.size not in (1, value.shape[axis]):
        raise _fail(node, ctx, f"the weight's zero point has {z.size} values for "
                               f"{value.shape[axis]} channels")
    shape = [1] * value.ndim
    shape[axis] = -1
    z = z.reshape(shape) if z.size > 1 else z.reshape(())
    return (value.astype(np.int64) - z).astype(np.float32)


@onnx_op("ConvInteger")
def conv_integer(ctx, node):
    x = _centred_input(ctx, node, ctx.inp(node, 0), ctx.inp(node, 2), "x")
    weight = _centred_weight(ctx, node, ctx.inp(node, 1), ctx.inp(node, 3), 0)
    w = ctx.add_const(ctx.temp(node, "weight"), weight)
    raw = _float_op(ctx, node, "Conv", [x, w])
    rounded = ctx.temp(node, "rounded")
    ctx.add("Eltwise", node, [raw], [rounded], name=rounded, type="ROUND")
    # its own name: the float Conv above carries the node's, and an op name is a key (the GPU
    # runtime's placement, traces, the quantize report), so two ops of one name were one op
    # there (a CPU Cast built as a GPU kernel)
    ctx.add("Cast", node, [rounded], name=ctx.temp(node, "int32"), to="int32")


def _scaled(ctx, node, acc, a_scale, b_scale, bias):
    """node's output = float(acc) * (a_scale * b_scale) [+ bias], as onnxruntime computes it."""
    b = ctx.const(b_scale)
    if b is None:
        raise _fail(node, ctx, "b_scale must be constant")
    accf = _as_float(ctx, node, acc, "acc")
    a = ctx.const(a_scale)
    if a is not None:   # both constant: one product, folded here
        scale = ctx.add_const(ctx.temp(node, "scale"),
                              (np.float32(np.asarray(a).reshape(())) * np.asarray(b, np.float32)))
    else:
        scale = ctx.temp(node, "scale")
        ctx.add("Eltwise", node, [a_scale, ctx.add_const(ctx.temp(node, "b_scale"),
                                                         np.asarray(b, np.float32))],
                [scale], name=scale, type="PROD")
    if bias is None:
        ctx.add("Eltwise", node, [accf, scale], type="PROD")
        return
    product = ctx.temp(node, "product")
    ctx.add("Eltwise", node, [accf, scale], [product], name=product, type="PROD")
    ctx.add("Eltwise", node, [product, bias], type="SUM")


def _matmul_integer(ctx, node, a, b, a_zero, b_zero) -> str:
    if b_zero is not None and ctx.const(b_zero) is None:
        raise _fail(node, ctx, "b_zero_point must be constant")
    acc = ctx.temp(node, "acc")
    inputs = [a, b] + [z for z in (a_zero, b_zero) if z is not None]
    ctx.add("MatMulInteger", node, inputs, [acc], name=acc, has_a_zero=int(a_zero is not None),
            has_b_zero=int(b_zero is not None))
    return acc


@onnx_op("DynamicQuantizeMatMul")
def dynamic_quantize_matmul(ctx, node):
    """com.microsoft: A (float), B, b_scale, b_zero_point, bias -> float Y."""
    names = [ctx.temp(node, k) for k in ("a_quantized", "a_scale", "a_zero")]
    ctx.add("DynamicQuantize", node, [ctx.inp(node, 0)], names, name=names[0])
    acc = _matmul_integer(ctx, node, names[0], ctx.inp(node, 1), names[2], ctx.inp(node, 3))
    _scaled(ctx, node, acc, names[1], ctx.inp(node, 2), ctx.inp(node, 4))


@onnx_op("MatMulIntegerToFloat")
def matmul_integer_to_float(ctx, node):
    """com.microsoft: A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias -> float Y."""
    acc = _matmul_integer(ctx, node, ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 4),
                          ctx.inp(node, 5))
    _scaled(ctx, node, acc, ctx.inp(node, 2), ctx.inp(node, 3), ctx.inp(node, 6))


def _dequantized_lstm_weight(ctx, node, i, i_scale, i_zp, what) -> str:
    """int8/uint8 [D, K, 4H] (scale/zero point per direction [D] or per column [D, 4H]) ->
    a float constant in ONNX LSTM's [D, 4H, K] layout."""
    value, scale = ctx.const(ctx.inp(node, i)), ctx.const(ctx.inp(node, i_scale))
    zp = ctx.const(ctx.inp(node, i_zp)) if ctx.inp(node, i_zp) is not None else np.zeros_like(scale)
    if value is None or scale is None or zp is None or value.ndim != 3:
        raise _fail(node, ctx, f"{what}, its scale and zero point must be constant ([D, K, 4H] "
                               f"integers)")
    d, _, cols = value.shape
    scale, zp = np.asarray(scale, np.float32), np.asarray(zp).astype(np.int64)
    if scale.size not in (d, d * cols) or zp.size != scale.size:
        raise _fail(node, ctx, f"{what}'s scale has {scale.size} values for {d} direction(s) of "
                               f"{cols} columns")
    per = (d, 1, 1) if scale.size == d else (d, 1, cols)
    real = (value.astype(np.int64) - zp.reshape(per)).astype(np.float32) * scale.reshape(per)
    return ctx.add_const(ctx.temp(node, what), real.transpose(0, 2, 1).copy())


@onnx_op("DynamicQuantizeLSTM")
def dynamic_quantize_lstm(ctx, node):
    """com.microsoft: X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point,
    R_scale, R_zero_point -> the LSTM's Y, Y_h, Y_c."""
    w = _dequantized_lstm_weight(ctx, node, 1, 8, 9, "W")
    r = _dequantized_lstm_weight(ctx, node, 2, 10, 11, "R")
    inputs = [node.input[0], w, r] + [node.input[k] if k < len(node.input) else "" for k in range(3, 8)]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    ctx.mappers["LSTM"](ctx, helper.make_node("LSTM", inputs, list(node.output),
                                              name=ctx.op_name(node), **attrs))
