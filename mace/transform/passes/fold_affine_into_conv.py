"""fold_affine_into_conv: a per-channel scale or shift by a constant folds into the unpadded
Conv2D that reads it.

PP-OCR v3/v4's LearnableAffineBlock puts y = a * hardswish(x) + b (Mul and Add by constants)
after every activation, so fold_batchnorm (which folds an affine into the conv before it) cannot
take it: the activation stands between. The conv after it can, where it has no padding (every
output then reads real input pixels only): conv(x * s + t) has filter W * s (along input
channels) and bias + sum over taps and input channels of W * t. Half of PP-OCR's affines are
read by a 1x1 conv; those before a padded depthwise conv stay (its border would read t).
The Eltwise must be PROD, SUM, SUB or DIV by a constant that varies along channels only, its
output read by that conv alone; the conv group 1 with constant weights.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg
from mace.ops._common import resolve_pads, to_nhwc_shape
from mace.transform.passes.fold_batchnorm import _channel_vector as channel_vector


def _unpadded(graph, conv) -> bool:
    fmt = get_arg(conv, "data_format", "NHWC")
    _, h, w, _ = to_nhwc_shape(graph.shape(conv.input[0]), fmt)
    kh, kw = graph.consts[conv.input[1]].shape[2:]
    pads = resolve_pads((h, w), (kh, kw), list(get_arg(conv, "strides", [1, 1])),
                        list(get_arg(conv, "dilations", [1, 1])), get_arg(conv, "pads", None),
                        get_arg(conv, "padding", ""))
    return not any(pads)


def _affine(graph, op, conv, channels):
    """(scale, shift) per input channel of `conv` that Eltwise `op` applies, or None."""
    if op.type != "Eltwise" or len(op.input) != 2 or get_arg(op, "activation", "") or get_arg(op, "coeff", None):
        return None
    kind = get_arg(op, "type")
    consts = [i for i, t in enumerate(op.input) if t in graph.consts]
    if len(consts) != 1 or (consts[0] == 0 and kind not in ("SUM", "PROD")):
        return None
    vec = channel_vector(graph, conv, op.input[consts[0]], channels)
    if vec is None or np.dtype(graph.dtype(op.output[0])) != np.float32:
        return None
    ones, zeros = np.ones(channels, np.float32), np.zeros(channels, np.float32)
    if kind == "DIV":
        return (1.0 / vec, zeros) if np.all(vec != 0) else None
    return {"PROD": (vec, zeros), "SUM": (ones, vec), "SUB": (ones, -vec)}.get(kind)


def _fold(graph, conv, scale, shift):
    w = np.asarray(graph.consts[conv.input[1]], np.float32)   # OIHW
    o = w.shape[0]
    bias = np.asarray(graph.consts[conv.input[2]], np.float32).reshape(-1) if len(conv.input) > 2 \
        else np.zeros(o, np.float32)
    new_b = bias + np.einsum("oihw,i->o", w.astype(np.float64), shift.astype(np.float64)).astype(np.float32)
    new_w = w * scale.reshape(1, -1, 1, 1)
    w_name = graph.add_const(graph.unique_name(conv.input[1]), new_w)
    b_name = graph.add_const(graph.unique_name(conv.name + "_bias"), new_b)
    del conv.input[1:]
    conv.input.extend([w_name, b_name])


def fold_affine_into_conv(graph, options) -> bool:
    producers, consumers = graph.producers(), graph.consumers()
    outputs = set(graph.output_names)
    removed = set()
    for conv in graph.net.op:
        op = producers.get(conv.input[0]) if conv.type == "Conv2D" and conv.input else None
        if (op is None or op.name in removed or conv.name in removed or int(get_arg(conv, "group", 1)) != 1
                or len(conv.input) > 3
                or conv.input[1] not in graph.consts or graph.consts[conv.input[1]].ndim != 4
                or (len(conv.input) > 2 and conv.input[2] not in graph.consts)
                or len(consumers[op.output[0]]) != 1 or op.output[0] in outputs or not _unpadded(graph, conv)):
            continue
        affine = _affine(graph, op, conv, graph.consts[conv.input[1]].shape[1])
        if affine is None:
            continue
        _fold(graph, conv, *affine)
        conv.input[0] = next(t for t in op.input if t not in graph.consts)
        conv.framework_op.extend(op.framework_op)
        removed.add(op.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return bool(removed)
