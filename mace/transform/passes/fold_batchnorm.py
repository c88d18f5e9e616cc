"""fold_batchnorm: fold per-channel scale/shift ops into the conv or FC that feeds them.

Covers BatchNorm (scale, offset) and Eltwise PROD / SUM / SUB / DIV whose
other operand is a constant broadcasting along the channel axis only (how
Caffe2-exported models spell BatchNorm). The producer must be a Conv2D,
DepthwiseConv2d or FullyConnected with a constant filter, no fused activation
yet, and no other reader of its output.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg

PRODUCERS = {"Conv2D", "DepthwiseConv2d", "FullyConnected"}


def _channel_vector(graph, producer, const_name, channels):
    """The constant as a length-C vector, or None if it varies along other axes."""
    value = np.asarray(graph.consts[const_name], np.float32)
    out_rank = len(graph.shape(producer.output[0]))
    if value.ndim > out_rank:
        return None
    full = value.reshape((1,) * (out_rank - value.ndim) + value.shape)
    axis = 1 if get_arg(producer, "data_format", "NHWC") == "NCHW" and out_rank == 4 else out_rank - 1
    if any(d != 1 for i, d in enumerate(full.shape) if i != axis):
        return None
    vec = full.reshape(-1)
    if vec.size == 1:
        return np.full(channels, vec[0], np.float32)
    return vec if vec.size == channels else None


def _scale_shift(graph, op, producer, channels):
    """(scale, shift) vectors the op applies after `producer`, or None."""
    if op.type == "BatchNorm":
        if not (op.input[1] in graph.consts and op.input[2] in graph.consts):
            return None
        return (np.asarray(graph.consts[op.input[1]], np.float32).reshape(-1),
                np.asarray(graph.consts[op.input[2]], np.float32).reshape(-1))
    if op.type != "Eltwise" or len(op.input) != 2 or get_arg(op, "activation", ""):
        return None
    kind = get_arg(op, "type")
    if op.input[0] == producer.output[0]:
        const = op.input[1]
    elif kind in ("SUM", "PROD"):
        const = op.input[0]
    else:
        return None
    if const not in graph.consts:
        return None
    vec = _channel_vector(graph, producer, const, channels)
    if vec is None:
        return None
    ones, zeros = np.ones(channels, np.float32), np.zeros(channels, np.float32)
    if kind == "DIV":  # only here: a zero bias of a SUM is no division by zero
        return (1.0 / vec, zeros) if np.all(vec != 0) else None
    return {"PROD": (vec, zeros), "SUM": (ones, vec), "SUB": (ones, -vec)}.get(kind)


def _fold(graph, producer, scale, shift):
    w = np.asarray(graph.consts[producer.input[1]], np.float32)
    o = w.shape[0]
    new_w = w * scale.reshape((o,) + (1,) * (w.ndim - 1))
    bias = np.asarray(graph.consts[producer.input[2]], np.float32) if len(producer.input) > 2 \
        else np.zeros(o, np.float32)
    w_name = graph.add_const(graph.unique_name(producer.input[1]), new_w)
    b_name = graph.add_const(graph.unique_name(producer.name + "_bias"), bias * scale + shift)
    del producer.input[1:]
    producer.input.extend([w_name, b_name])


def fold_batchnorm(graph, options) -> bool:
    producers = graph.producers()
    consumers = graph.consumers()
    outputs = set(graph.output_names)
    removed = set()
    for op in graph.net.op:
        src = producers.get(op.input[0]) if op.input else None
        if op.type == "Eltwise" and src is None and len(op.input) == 2:
            src = producers.get(op.input[1])
        if (src is None or src.type not in PRODUCERS or src.input[1] not in graph.consts
                or get_arg(src, "activation", "") or len(consumers[src.output[0]]) != 1
                or src.output[0] in outputs or src.name in removed):
            continue
        if len(src.input) > 2 and src.input[2] not in graph.consts:
            continue
        channels = graph.consts[src.input[1]].shape[0]
        ss = _scale_shift(graph, op, src, channels)
        if ss is None or any(v.shape != (channels,) for v in ss):
            continue
        _fold(graph, src, *ss)
        # The producer now writes the folded op's output.
        src.output[0] = op.output[0]
        src.framework_op.extend(op.framework_op)
        removed.add(op.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return bool(removed)
