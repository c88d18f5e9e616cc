"""ONNX QOperator models: QLinearConv, QLinearMatMul and onnxruntime's com.microsoft QLinear
ops (QGemm, QLinearAdd/Mul/Concat, QLinear(Global)AveragePool, QLinearLeakyRelu/Sigmoid/Softmax) ->
float ops on the quantization grid.

onnxruntime's quantize_static with QuantFormat.QOperator (and the ONNX model zoo's int8
models) write quantized layers as single nodes over uint8/int8 tensors; ops that only move
data (MaxPool, Reshape, Flatten, Transpose, ...) read those integers directly. As with QDQ
pairs (ops_quant.py), MACE runs them in float and keeps what they knew:

* the quantized input is read as float on its grid: the float tensor a QuantizeLinear or an
  earlier QLinear node rounded (one FakeQuantize per quantized tensor, shared by its
  readers), else (q - zero_point) * scale computed from the integers;
* int8/uint8 weights (per-tensor, or per output channel / column) fold to float constants
  (q - zero_point) * scale, an int32 bias to bias * x_scale * w_scale, as onnxruntime
  computes them;
* the float Conv / MatMul result is rounded to the output's grid by a FakeQuantize, its range
  recorded for the quantize pass; the integer output tensor is also computed (QuantizeLinear's
  float ops) for a reader that needs the integers and removed when nobody does.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from mace.frontends.onnx.ops_quant import (_along, _dequantize_ops, _fail, _params, _pending,
                                           _quantize_ops, fake_quantize)
from mace.frontends.onnx.registry import onnx_op


def _grid_floats(ctx) -> dict:
    """integer tensor name -> its float tensor on the grid (FakeQuantize output), made once."""
    return vars(ctx).setdefault("qlinear_grid_floats", {})


def _tensor_params(ctx, node, i_scale, i_zp, what):
    """A per-tensor (scale, zero point) pair from inputs i_scale, i_zp of `node`."""
    view = helper.make_node(node.op_type, ["", node.input[i_scale],
                                           node.input[i_zp] if len(node.input) > i_zp else ""],
                            ["_"], name=ctx.op_name(node))
    scale, zp = _params(ctx, view)
    if scale.size != 1 or zp.size != 1:
        raise _fail(node, ctx, f"{what} must be quantized per tensor (one scale and zero point)")
    s = np.float32(scale.reshape(-1)[0])
    if not (np.isfinite(s) and s > 0):
        raise _fail(node, ctx, f"{what}'s scale {s} must be a positive finite number")
    return s, zp.reshape(-1)[0]


def _same_grid(pending, s, zp) -> bool:
    _, scale, zero = pending
    return (scale.size == 1 and np.float32(scale.reshape(-1)[0]) == s and zero.dtype == zp.dtype
            and int(zero.reshape(-1)[0]) == int(zp))


def _float_input(ctx, node, i, i_scale, i_zp, what):
    """Input i (integers) as a float tensor on its grid."""
    q = ctx.inp(node, i)
    s, zp = _tensor_params(ctx, node, i_scale, i_zp, what)
    made = _grid_floats(ctx).get((q, float(s), int(zp)))
    if made:
        return made
    pending = _pending(ctx).get(q)
    out = ctx.temp(node, f"{what}_float")
    if pending is not None and _same_grid(pending, s, zp):
        fake_quantize(ctx, node, pending[0], s, zp, out)   # the float it was rounded from
    else:
        _dequantize_ops(ctx, node, q, np.asarray(s), np.asarray(zp), out=out)
    _grid_floats(ctx)[(q, float(s), int(zp))] = out
    return out


def _folded_weight(ctx, node, i, i_scale, i_zp, axis, what):
    """A constant int8/uint8 input dequantized per tensor or along `axis`."""
    value = ctx.const(ctx.inp(node, i))
    if value is None:
        raise _fail(node, ctx, f"{what} must be a constant initializer")
    scale = np.asarray(ctx.const(ctx.inp(node, i_scale)), np.float32)
    zp_name = ctx.inp(node, i_zp)
    zp = np.zeros_like(scale, value.dtype) if zp_name is None else ctx.const(zp_name)
    if zp is None or scale is None:
        raise _fail(node, ctx, f"{what}'s scale and zero point must be constant")
    axis = axis % value.ndim
    if scale.size not in (1, value.shape[axis]) or np.size(zp) not in (1, value.shape[axis]):
        raise _fail(node, ctx, f"{what}'s scale has {scale.size} values for {value.shape[axis]} "
                               f"channels")
    s, z = _along(scale, axis, value.ndim), _along(np.asarray(zp), axis, value.ndim)
    real = (value.astype(np.int64) - z.astype(np.int64)).astype(np.float32) * s
    return real.astype(np.float32), scale


def _requantized_output(ctx, node, raw, i_scale, i_zp):
    """The float result `raw` onto the output's grid (FakeQuantize); the integers too."""
    s, zp = _tensor_params(ctx, node, i_scale, i_zp, "y")
    fq = ctx.temp(node, "grid")
    fake_quantize(ctx, node, raw, s, zp, fq)
    _integer_output(ctx, node, raw, fq, s, zp)


def _integer_output(ctx, node, raw, fq, s, zp):
    """node.output[0] is the integers of `fq` (= `raw` rounded to the grid s, zp): readers of
    the grid take `fq`; the integers themselves are computed (QuantizeLinear's float ops)
    and removed when nobody reads them."""
    q = node.output[0]
    _pending(ctx)[q] = (raw, np.asarray(s), np.asarray(zp))
    _grid_floats(ctx)[(q, float(s), int(zp))] = fq
    _on_grid(ctx)[q] = (fq, s, zp)
    _quantize_ops(ctx, node, raw, np.asarray(s), np.asarray(zp))


def _on_grid(ctx) -> dict:
    """integer tensor name -> (its float tensor on the grid, scale, zero point)."""
    return vars(ctx).setdefault("qlinear_on_grid", {})


# Ops that only move or select values (or take a max) commute with dequantization: over the
# integers of a QOperator model they run on the grid floats instead, and their output is the
# integers of their float output, on the same grid (no Cast, no integer kernels needed).
GRID_PASSTHROUGH = frozenset({"MaxPool", "GlobalMaxPool", "Reshape", "Flatten", "Transpose",
                              "Squeeze", "Unsqueeze", "Identity", "Slice", "Split",
                              "DepthToSpace", "SpaceToDepth"})


def on_grid(mapper):
    """`mapper` run on the grid float where a GRID_PASSTHROUGH node reads QOperator integers."""
    def mapped(ctx, node):
        grid = _on_grid(ctx).get(ctx.inp(node, 0))
        if grid is None or len(node.output) != 1:
            return mapper(ctx, node)
        fq, s, zp = grid
        inputs = [fq] + list(node.input[1:])
        out = ctx.temp(node, "on_grid")
        mapper(ctx, _synthetic(node.op_type, node, inputs, out, ctx))
        _integer_output(ctx, node, out, out, s, zp)
    return mapped


def _synthetic(op_type, node, inputs, output, ctx, drop=()):
    """A float ONNX node with `node`'s attributes, for the float op's own mapping."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in drop}
    return helper.make_node(op_type, inputs, [output], name=ctx.op_name(node), **attrs)


def _float_op(ctx, node, op_type, inputs, drop=()):
    """Map the float `op_type` over float `inputs` with `node`'s attributes: its result."""
    raw = ctx.temp(node, op_type.lower())
    ctx.mappers[op_type](ctx, _synthetic(op_type, node, inputs, raw, ctx, drop))
    return raw


@onnx_op("QLinearConv")
def qlinear_conv(ctx, node):
    x = _float_input(ctx, node, 0, 1, 2, "x")
    x_scale = _tensor_params(ctx, node, 1, 2, "x")[0]
    weight, w_scale = _folded_weight(ctx, node, 3, 4, 5, 0, "w")
    inputs = [x, ctx.add_const(ctx.temp(node, "weight"), weight)]
    bias = ctx.const(ctx.inp(node, 8))
    if ctx.inp(node, 8) is not None:
        if bias is None:
            raise _fail(node, ctx, "the bias must be a constant initializer")
        # onnxruntime's bias scale: x_scale * w_scale (per output channel)
        real = bias.astype(np.float32) * (np.float32(x_scale) * w_scale.reshape(-1))
        inputs.append(ctx.add_const(ctx.temp(node, "bias"), real.astype(np.float32)))
    _requantized_output(ctx, node, _float_op(ctx, node, "Conv", inputs), 6, 7)


@onnx_op("QLinearMatMul")
def qlinear_matmul(ctx, node):
    a = _float_input(ctx, node, 0, 1, 2, "a")
    if ctx.const(ctx.inp(node, 3)) is not None:
        b = ctx.add_const(ctx.temp(node, "b"), _folded_weight(ctx, node, 3, 4, 5, -1, "b")[0])
    else:
        b = _float_input(ctx, node, 3, 4, 5, "b")
    _requantized_output(ctx, node, _float_op(ctx, node, "MatMul", [a, b]), 6, 7)


@onnx_op("QGemm")
def qgemm(ctx, node):
    """com.microsoft QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C (int32), y_scale, y_zp;
    without y_scale the output is float."""
    if ctx.inp(node, 6) is not None and float(ctx.attr(node, "alpha", 1.0)) != 1.0:
        raise _fail(node, ctx, "alpha other than 1 with a bias is not supported (the bias's "
                               "scale would depend on it)")
    a = _float_input(ctx, node, 0, 1, 2, "a")
    a_scale = _tensor_params(ctx, node, 1, 2, "a")[0]
    trans_b = int(ctx.attr(node, "transB", 0))
    if ctx.const(ctx.inp(node, 3)) is not None:   # per output column: axis 0 of B^T, 1 of B
        weight, b_scale = _folded_weight(ctx, node, 3, 4, 5, 0 if trans_b else 1, "b")
        b = ctx.add_const(ctx.temp(node, "b"), weight)
    else:
        b, b_scale = _float_input(ctx, node, 3, 4, 5, "b"), _tensor_params(ctx, node, 4, 5, "b")[0]
    inputs = [a, b]
    bias = ctx.const(ctx.inp(node, 6))
    if ctx.inp(node, 6) is not None:
        if bias is None:
            raise _fail(node, ctx, "the bias must be a constant initializer")
        scale = np.float32(a_scale) * np.asarray(b_scale, np.float32).reshape(-1)
        inputs.append(ctx.add_const(ctx.temp(node, "c"), (bias.astype(np.float32) * scale)
                                    .astype(np.float32)))
    raw = _float_op(ctx, node, "Gemm", inputs)
    if ctx.inp(node, 7) is None:   # a float output
        ctx.add("Identity", node, [raw])
        return
    _requantized_output(ctx, node, raw, 7, 8)


# onnxruntime's com.microsoft QLinear ops over one or two quantized inputs:
# name -> (float op, the (integers, scale, zero point) input triples, the output's scale/zp inputs)
_SIMPLE = {
    "QLinearAdd": ("Add", [(0, 1, 2), (3, 4, 5)], (6, 7)),
    "QLinearMul": ("Mul", [(0, 1, 2), (3, 4, 5)], (6, 7)),
    "QLinearGlobalAveragePool": ("GlobalAveragePool", [(0, 1, 2)], (3, 4)),
    "QLinearAveragePool": ("AveragePool", [(0, 1, 2)], (3, 4)),
    "QLinearLeakyRelu": ("LeakyRelu", [(0, 1, 2)], (3, 4)),
    "QLinearSigmoid": ("Sigmoid", [(0, 1, 2)], (3, 4)),
}


@onnx_op(*_SIMPLE)
def qlinear_simple(ctx, node):
    op_type, triples, (y_scale, y_zp) = _SIMPLE[node.op_type]
    if int(ctx.attr(node, "channels_last", 0)):
        raise _fail(node, ctx, "channels_last inputs are not supported")
    inputs = [_float_input(ctx, node, q, s, z, f"x{k}") for k, (q, s, z) in enumerate(triples)]
    raw = _float_op(ctx, node, op_type, inputs, drop=("channels_last",))
    _requantized_output(ctx, node, raw, y_scale, y_zp)


@onnx_op("QLinearConcat")
def qlinear_concat(ctx, node):
    """com.microsoft QLinearConcat: Y_scale, Y_zp, then (X, X_scale, X_zp) per input."""
    if (len(node.input) - 2) % 3 or len(node.input) < 5:
        raise _fail(node, ctx, f"expected 2 + 3 * n inputs, got {len(node.input)}")
    inputs = [_float_input(ctx, node, i, i + 1, i + 2, f"x{i // 3}")
              for i in range(2, len(node.input), 3)]
    _requantized_output(ctx, node, _float_op(ctx, node, "Concat", inputs), 0, 1)


@onnx_op("QLinearSoftmax")
def qlinear_softmax(ctx, node):
    """com.microsoft QLinearSoftmax: X, X_scale, X_zp, Y_scale, Y_zp; `opset` is the opset of
    the Softmax it replaced, whose axis rule (before 13: over the flattened trailing axes) it keeps."""
    x = _float_input(ctx, node, 0, 1, 2, "x")
    own = ctx.opset
    ctx.opset = int(ctx.attr(node, "opset", own))
    try:
        raw = _float_op(ctx, node, "Softmax", [x], drop=("opset",))
    finally:
        ctx.opset = own
    _requantized_output(ctx, node, raw, 3, 4)


# the ops this module maps from onnxruntime's com.microsoft domain (frontend.py accepts them)
COM_MICROSOFT = frozenset({"QGemm", "QLinearConcat", "QLinearSoftmax", *_SIMPLE})
