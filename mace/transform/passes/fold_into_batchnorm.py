"""fold_into_batchnorm: fold per-channel Eltwise scale / shift ops into the BatchNorm before them.

BatchNorm -> Eltwise PROD c1 -> Eltwise SUM c2 (+ fused activation) becomes one
BatchNorm with scale * c1 and offset * c1 + c2 and the activation: DenseNet-121's
pre-activation blocks are spelled this way, and each folded op is one pass less
over the activations (124 Eltwise ops, ~5 of 48 ms on one core). fold_batchnorm
covers the same ops after a conv; this pass covers BatchNorms that cannot fold
into a conv (a ReLU stands between them). SUB and DIV by a constant fold too.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg, set_arg


def _channel_vector(graph, bn, name, channels):
    """The constant as a length-C vector along the BatchNorm's channel axis, or None."""
    value = np.asarray(graph.consts[name], np.float32)
    rank = len(graph.shape(bn.output[0]))
    if value.ndim > rank:
        return None
    full = value.reshape((1,) * (rank - value.ndim) + value.shape)
    axis = 1 if get_arg(bn, "data_format", "NHWC") == "NCHW" and rank > 1 else rank - 1
    if any(d != 1 for i, d in enumerate(full.shape) if i != axis) or full.size not in (1, channels):
        return None
    return np.broadcast_to(full.reshape(-1), (channels,))


def _affine(graph, op, bn, channels):
    """(scale, shift) that Eltwise `op` applies to the BatchNorm's output, or None."""
    if op.type != "Eltwise" or len(op.input) != 2:
        return None
    kind = get_arg(op, "type")
    first = op.input[0] == bn.output[0]
    const = op.input[1] if first else op.input[0]
    if const not in graph.consts or not (first or kind in ("SUM", "PROD")):
        return None
    vec = _channel_vector(graph, bn, const, channels)
    if vec is None or graph.dtype(op.output[0]) != np.float32:
        return None
    ones, zeros = np.ones(channels, np.float32), np.zeros(channels, np.float32)
    if kind == "DIV":
        return (1.0 / vec, zeros) if np.all(vec != 0) else None
    return {"PROD": (vec, zeros), "SUM": (ones, vec), "SUB": (ones, -vec)}.get(kind)


def fold_into_batchnorm(graph, options) -> bool:
    consumers = graph.consumers()
    outputs = set(graph.output_names)
    removed = set()
    for bn in graph.net.op:
        if (bn.type != "BatchNorm" or bn.name in removed or get_arg(bn, "activation", "")
                or bn.output[0] in outputs or len(consumers.get(bn.output[0], [])) != 1
                or not all(t in graph.consts for t in bn.input[1:3])):
            continue
        op = consumers[bn.output[0]][0]
        scale = np.asarray(graph.consts[bn.input[1]], np.float32).reshape(-1)
        affine = _affine(graph, op, bn, scale.shape[0])
        if affine is None or op.name in removed:
            continue
        offset = np.asarray(graph.consts[bn.input[2]], np.float32).reshape(-1)
        s, t = affine
        bn.input[1] = graph.add_const(graph.unique_name(bn.input[1]), scale * s)
        bn.input[2] = graph.add_const(graph.unique_name(bn.input[2]), offset * s + t)
        for name in ("activation", "max_limit", "activation_coefficient"):
            if any(a.name == name for a in op.arg):
                set_arg(bn, name, get_arg(op, name))
        bn.output[0] = op.output[0]
        bn.framework_op.extend(op.framework_op)
        removed.add(op.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return bool(removed)
