"""fold_flatten_transpose: Transpose -> Reshape(N, K) -> FullyConnected reads the tensor as it is.

Flattening an NHWC feature map for a classifier trained on NCHW needs the
layout pass's Transpose back to NCHW; permuting the FC weight's K columns
once here makes both unnecessary: the Reshape flattens the NHWC tensor and the
Transpose dies (VGG-19 / AlexNet: a 25088-float copy per run; the digits
example: 2 of its 7 ops). The Transpose must keep the batch axis first and the
Reshape must flatten everything after it.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg
from mace.transform.passes.cleanup import remove_dead_ops


def _flatten_chain(graph, fc, producers, consumers):
    """(transpose, reshape) feeding `fc`'s input 0, or None."""
    reshape = producers.get(fc.input[0])
    if reshape is None or reshape.type != "Reshape" or len(consumers[reshape.output[0]]) != 1:
        return None
    transpose = producers.get(reshape.input[0])
    if transpose is None or transpose.type != "Transpose":
        return None
    shape_in, shape_out = graph.shape(transpose.input[0]), graph.shape(reshape.output[0])
    dims = list(get_arg(transpose, "dims", []))
    if (len(shape_out) != 2 or not dims or dims[0] != 0 or shape_out[0] != shape_in[0]
            or len(fc.input) < 2 or fc.input[1] not in graph.consts
            or reshape.output[0] in graph.output_names):
        return None
    return transpose, reshape


def fold_flatten_transpose(graph, options) -> bool:
    producers, consumers = graph.producers(), graph.consumers()
    changed = False
    for fc in graph.net.op:
        if fc.type != "FullyConnected":
            continue
        chain = _flatten_chain(graph, fc, producers, consumers)
        if chain is None:
            continue
        transpose, reshape = chain
        dims = list(get_arg(transpose, "dims"))
        w = np.asarray(graph.consts[fc.input[1]])
        t_shape = graph.shape(transpose.output[0])[1:]
        if w.ndim != 2 or w.shape[1] != int(np.prod(t_shape)):
            continue
        # W's columns follow the transposed tensor; reorder them to follow the input's axes.
        inverse = [dims.index(j) for j in range(1, len(dims))]
        w_x = w.reshape((w.shape[0],) + tuple(t_shape)).transpose([0] + inverse).reshape(w.shape)
        fc.input[1] = graph.add_const(graph.unique_name(fc.input[1]), np.ascontiguousarray(w_x))
        reshape.input[0] = transpose.input[0]
        # The flat vector now holds the NHWC order: a new name, so that nothing (layer-by-layer
        # validation) takes it for the framework's NCHW-ordered tensor.
        flat = graph.unique_name(reshape.output[0] + "_nhwc")
        graph.specs[flat] = graph.specs[reshape.output[0]]
        reshape.output[0] = fc.input[0] = flat
        changed = True
    if changed:
        remove_dead_ops(graph, options)
    return changed
