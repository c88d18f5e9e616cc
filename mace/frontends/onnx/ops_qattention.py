"""com.microsoft QAttention (onnxruntime's quantized BERT attention, from quantize_dynamic on a
model whose attention onnxruntime's transformer optimizer fused): the float attention it stands
for, over the dequantized input and weights.

QAttention(input uint8/int8 [B, S, D], weight int8/uint8 [D, 3H] constant, bias [3H],
input_scale, weight_scale (one, or one per column), mask_index?, input_zero_point?,
weight_zero_point?) -> [B, S, H], num_heads heads of H / num_heads:

    x = (input - input_zero_point) * input_scale;  W = (weight - weight_zero_point) * weight_scale
    q, k, v = split(x @ W + bias);  per head: softmax(q k^T * scale + mask) v;  heads concatenated

onnxruntime multiplies the integers in int32 and scales once; here the products are float32,
the same up to float rounding. Masks: none, or the 2-D [B, S] 1/0 mask (0 adds
mask_filter_value, default -10000, to a key's scores), as onnxruntime applies them; other
mask_index forms, `past` state and `unidirectional` are refused naming the node.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from mace.frontends.onnx.ops_quant import _fail
from mace.frontends.onnx.ops_spatial import _static_input
from mace.frontends.onnx.registry import onnx_op

QATTENTION = frozenset({"QAttention"})


def _onnx(ctx, node, op_type: str, inputs: list, what: str, **attrs) -> str:
    """Map one ONNX op over `inputs` with its own mapping; its output's name."""
    out = ctx.temp(node, what)
    ctx.mappers[op_type](ctx, helper.make_node(op_type, inputs, [out], name=out, **attrs))
    return out


def _const(ctx, node, value, what: str) -> str:
    return ctx.add_const(ctx.temp(node, what), np.asarray(value))


def _weight(ctx, node) -> np.ndarray:
    """(weight - weight_zero_point) * weight_scale as float32 [D, 3H]."""
    w = ctx.const(ctx.inp(node, 1))
    if w is None:
        raise _fail(node, ctx, "the weight must be a constant initializer")
    scale = _static_input(ctx, node, 4, "weight_scale")
    if scale is None:
        raise _fail(node, ctx, "weight_scale is required")
    scale = scale.astype(np.float32).reshape(-1)
    zero = _static_input(ctx, node, 7, "weight_zero_point")
    zero = np.zeros(1, np.int64) if zero is None else zero.astype(np.int64).reshape(-1)
    for values, what in ((scale, "weight_scale"), (zero, "weight_zero_point")):
        if values.size not in (1, w.shape[1]):
            raise _fail(node, ctx, f"{what} has {values.size} values for {w.shape[1]} weight columns")
    return ((w.astype(np.int64) - zero).astype(np.float32) * scale).astype(np.float32)


def _input(ctx, node) -> str:
    """(input - input_zero_point) * input_scale as float; zero point and scale may be run-time
    scalars (DynamicQuantizeLinear's outputs)."""
    x = _onnx(ctx, node, "Cast", [ctx.inp(node, 0)], "input_float", to=1)
    zero = ctx.inp(node, 6)
    if zero is not None:
        z = (_const(ctx, node, np.float32(np.asarray(ctx.const(zero)).reshape(())), "input_zero")
             if ctx.const(zero) is not None else _onnx(ctx, node, "Cast", [zero], "input_zero", to=1))
        x = _onnx(ctx, node, "Sub", [x, z], "input_centred")
    scale = ctx.inp(node, 3)
    if ctx.const(scale) is not None:
        scale = _const(ctx, node, np.float32(np.asarray(ctx.const(scale)).reshape(())), "input_scale")
    return _onnx(ctx, node, "Mul", [x, scale], "input_real")


@onnx_op("QAttention")
def qattention(ctx, node):
    heads = ctx.attr(node, "num_heads")
    if not heads:
        raise _fail(node, ctx, "num_heads is required")
    if ctx.attr(node, "unidirectional", 0):
        raise _fail(node, ctx, "unidirectional (causal) QAttention is not supported here")
    if ctx.inp(node, 8) is not None or len([o for o in node.output[1:] if o]):
        raise _fail(node, ctx, "past / present state is not supported here")
    weight = _weight(ctx, node)
    hidden = weight.shape[1] // 3
    if weight.shape[1] % 3 or hidden % int(heads):
        raise _fail(node, ctx, f"the weight's {weight.shape[1]} columns are not 3 x num_heads ({heads}) x head size")
    size = hidden // int(heads)
    bias = ctx.inp(node, 2)
    qkv = _onnx(ctx, node, "MatMul", [_input(ctx, node), _const(ctx, node, weight, "weight")], "qkv")
    if bias is not None:
        qkv = _onnx(ctx, node, "Add", [qkv, bias], "qkv_biased")
    # [B, S, 3H] -> [B, S, 3, N, h] -> [3, B, N, S, h]
    split = _onnx(ctx, node, "Reshape", [qkv, _const(ctx, node, np.array([0, 0, 3, heads, size], np.int64),
                                                       "qkv_shape")], "qkv_heads")
    split = _onnx(ctx, node, "Transpose", [split], "qkv_first", perm=[2, 0, 3, 1, 4])
    q, k, v = (_onnx(ctx, node, "Gather", [split, _const(ctx, node, np.int64(i), f"index{i}")], f"qkv{i}", axis=0)
               for i in range(3))
    scores = _onnx(ctx, node, "MatMul", [q, _onnx(ctx, node, "Transpose", [k], "k_t", perm=[0, 1, 3, 2])], "scores")
    scale = ctx.attr(node, "scale") or 1.0 / np.sqrt(size)
    scores = _onnx(ctx, node, "Mul", [scores, _const(ctx, node, np.float32(scale), "scale")], "scaled")
    mask = ctx.inp(node, 5)
    if mask is not None:
        scores = _onnx(ctx, node, "Add", [scores, _mask_bias(ctx, node, mask)], "masked")
    probs = _onnx(ctx, node, "Softmax", [scores], "probs", axis=-1)
    out = _onnx(ctx, node, "MatMul", [probs, v], "context")                      # [B, N, S, h]
    out = _onnx(ctx, node, "Transpose", [out], "context_t", perm=[0, 2, 1, 3])    # [B, S, N, h]
    ctx.mappers["Reshape"](ctx, helper.make_node(
        "Reshape", [out, _const(ctx, node, np.array([0, 0, hidden], np.int64), "out_shape")], [node.output[0]],
        name=ctx.op_name(node)))


def _mask_bias(ctx, node, mask: str) -> str:
    """The 2-D [B, S] 1/0 mask as the [B, 1, 1, S] scores bias: (1 - mask) * mask_filter_value."""
    shape = ctx.shape(mask) if hasattr(ctx, "shape") else None
    if shape is None or len(shape) != 2:
        raise _fail(node, ctx, f"mask_index of shape {shape}: only the 2-D [batch, sequence] 1/0 mask is "
                               f"supported here")
    m = _onnx(ctx, node, "Cast", [mask], "mask_float", to=1)
    inverted = _onnx(ctx, node, "Sub", [_const(ctx, node, np.float32(1), "one"), m], "mask_inverted")
    fill = np.float32(ctx.attr(node, "mask_filter_value", -10000.0))
    bias = _onnx(ctx, node, "Mul", [inverted, _const(ctx, node, fill, "mask_fill")], "mask_bias")
    return _onnx(ctx, node, "Reshape", [bias, _const(ctx, node, np.array([0, 1, 1, -1], np.int64), "mask_shape")],
                 "mask_bias4")
