"""Follow the outputs whose length depends on the data (`OpSpec.ragged`: NonZero,
NonMaxSuppression, TopK of a computed k, Range of a limit known at run time) to the model
outputs, and record those with their length tensors (mace/ir/ragged.py) for the engine to cut
them after each run.

Such a tensor is planned at its upper bound, its rows past the length zero. An op may read it
when every row of its output depends on one row of it: element-wise ops, Cast, Gather (by
those indices, or of rows along another axis), Transpose, a Reshape that keeps that axis
whole, a Split and a Concat along another axis (the Concat's parts all that long). A Shape of
it gets the length (its value is that of the run), a TopK of a computed k over its rows ranks
only those rows and a NonZero finds only theirs (input 2, resp. 1: their length), and a
RaggedToDense (TensorFlow's Pad to a fixed row count) ends it. Any other reader (a reduction,
Softmax or Concat along the axis, a MatMul ...) would mix the padding in: the convert stops
naming it.
"""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError
from mace.ir.args import get_arg, set_arg
from mace.ir.ragged import record_ragged_outputs
from mace.ops.registry import spec

ELEMENT_WISE = {"Identity", "Cast", "Activation", "Eltwise", "Select"}


def mark_ragged(graph, options) -> bool:
    ragged = ragged_tensors(graph, edit=True)
    record_ragged_outputs(graph.net, {n: (ragged[n][1], ragged[n][0])
                                      for n in graph.output_names if n in ragged})
    return False


def ragged_tensors(graph, edit: bool = False) -> dict:
    """{tensor: (axis, length tensor, the op that made it)} of the tensors whose length along
    `axis` depends on the data. With `edit`, the readers that need the length get it (the pass);
    without, the graph is only read (a frontend asking which axis of a tensor is its length:
    mace/transform/value_bounds.py). A reader that would mix the padding in is a ModelError."""
    ragged = {}
    for op in graph.net.op:
        read = [t for t in op.input if t in ragged]
        if read and op.type == "Shape":   # the length the run found, in place of the bound
            axis, length, _ = ragged[op.input[0]]
            if edit and len(op.input) == 1:
                op.input.append(length)
                set_arg(op, "ragged_axis", axis)
        elif read and (_ranks_rows(graph, op, ragged) or _counts_rows(op, ragged)):
            if edit and len(op.input) == spec_inputs(op):
                op.input.append(ragged[op.input[0]][1])
                if op.type == "NonZero":
                    set_arg(op, "ragged_axis", ragged[op.input[0]][0])
        elif read and op.type == "RaggedToDense":   # padded to a fixed size: static from here
            _check_dense(op, ragged)
        elif read:
            ragged.update(_follow(graph, op, read, ragged))
        for i, (axis, length) in spec(op.type).ragged(op).items():
            rank = len(graph.shape(op.output[i]))
            ragged[op.output[i]] = (axis % rank, op.output[length], op.name)
    return ragged


def spec_inputs(op) -> int:
    """How many inputs `op` has before the pass gives it a length (TopK: x, k; NonZero: x)."""
    return 2 if op.type == "TopK" else 1


def _counts_rows(op, ragged) -> bool:
    """A NonZero of a data-dependent tensor (TensorFlow's Where of a test on NMS's rows) looks
    only at the rows it has, given their length as input 1: the padding after them, which an
    element-wise op may have made non-zero, is never counted."""
    return op.type == "NonZero" and op.input[0] in ragged


def _check_dense(op, ragged) -> None:
    axis, length, source = ragged[op.input[0]]
    if op.input[1] != length or get_arg(op, "axis") != axis:
        raise ModelError(f"op '{op.name}' (RaggedToDense) pads '{op.input[0]}' by the length "
                         f"'{op.input[1]}' along axis {get_arg(op, 'axis')}, but its rows are counted "
                         f"by '{length}' along axis {axis} (made by op '{source}')")


def _ranks_rows(graph, op, ragged) -> bool:
    """A TopK of a computed k over the rows of a data-dependent tensor (Paddle2ONNX's
    multiclass_nms3 keeps the best min(keep_top_k, n) of NMS's rows): it ranks only the first
    rows, given their length as input 2; its outputs have their own length (its `ragged`)."""
    if op.type != "TopK" or len(op.input) != 2 or op.input[0] not in ragged or op.input[1] in ragged:
        return False
    return ragged[op.input[0]][0] == get_arg(op, "axis", -1) % len(graph.shape(op.input[0]))


def _follow(graph, op, read, ragged) -> dict:
    """{output: ragged entry} of `op`, which reads the ragged tensors `read`, or a ModelError."""
    if op.type == "Gather" and op.input[1] in ragged and op.input[0] in ragged and \
            ragged[op.input[0]][0] == get_arg(op, "axis", 0) % len(graph.shape(op.input[0])):
        # rows picked by data-dependent indices (NMS's rows re-ordered by a TopK): the output
        # has the indices' length; the padding of the data is never picked by a kept index
        read = [op.input[1]]
    first = ragged[read[0]]
    if len({ragged[t][1] for t in read}) > 1:
        raise _refuse(op, read[0], first, "with another data-dependent length")
    axis = _output_axis(graph, op, read, ragged)
    if axis is None:
        raise _refuse(op, read[0], first, "")
    return {t: (axis, first[1], first[2]) for t in op.output}


def _output_axis(graph, op, read, ragged):
    """The axis of op's outputs that carries the length, or None where the op mixes rows."""
    out_shape = graph.shape(op.output[0])
    if op.type in ELEMENT_WISE:
        axes = set()
        for t in op.input:
            shape = graph.shape(t)
            moved = len(out_shape) - len(shape)
            if t in ragged:
                axes.add(ragged[t][0] + moved)
        if len(axes) != 1:
            return None
        axis = axes.pop()
        for t in op.input:   # the other operands broadcast along that axis, else they mix rows
            shape = graph.shape(t)
            where = axis - (len(out_shape) - len(shape))
            if t not in ragged and 0 <= where < len(shape) and shape[where] != 1:
                return None
        return axis
    if op.type == "Gather":
        data, idx = op.input[0], op.input[1]
        gather = get_arg(op, "axis", 0) % len(graph.shape(data))
        if idx in ragged:
            return None if data in read else gather + ragged[idx][0]
        axis = ragged[data][0]
        if axis == gather:
            return None
        return axis if axis < gather else axis + len(graph.shape(idx)) - 1
    if op.type == "Concat":   # side by side along another axis, every part as long
        axis = ragged[read[0]][0]
        if len(read) == len(op.input) and {ragged[t][0] for t in read} == {axis} and \
                get_arg(op, "axis", 0) % len(out_shape) != axis:
            return axis
        return None
    if op.type == "Split":   # columns of the rows (ClipToWindow's ymin, xmin, ...): each as long
        axis = ragged[read[0]][0]
        return None if get_arg(op, "axis", 0) % len(out_shape) == axis else axis
    if op.type == "Transpose":
        return list(get_arg(op, "dims")).index(ragged[read[0]][0])
    if op.type == "Reshape":
        shape, axis = graph.shape(op.input[0]), ragged[read[0]][0]
        before = int(np.prod(shape[:axis], dtype=np.int64))
        for j, d in enumerate(out_shape):   # the axis kept whole, only the dims around it regrouped
            if d == shape[axis] and int(np.prod(out_shape[:j], dtype=np.int64)) == before:
                return j
    return None


def _refuse(op, tensor, entry, detail) -> ModelError:
    axis, _, source = entry
    return ModelError(f"op '{op.name}' ({op.type}) reads '{tensor}', whose length along axis {axis} depends "
                      f"on the data (made by op '{source}'){' ' + detail if detail else ''}: such a tensor "
                      f"goes only through element-wise ops, Cast, Gather, Transpose, Reshapes that keep "
                      f"that axis and Splits along another, or out of the model")
