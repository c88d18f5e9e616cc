"""fold_reshape_pairs: a Reshape that a later Reshape undoes goes, with the element-wise ops
between them moved before it (1-D convolutions without their layout ops).

ONNX 1-D convolutions (silero_vad, audio models) arrive as Conv2D on an (N, C, 1, L) view: each
Conv1d reads Reshape(N, C, L -> N, C, 1, L) and writes Reshape(-> N, O, L), and its ReLU sits on
the 3-D tensor between one conv's Reshape out and the next one's Reshape in. to_nhwc then puts a
Transpose pair around every conv: silero_vad_half spent 36 of its 66 ops on layout. Here:
- Reshape -> an element-wise op of one input (Activation, unary Eltwise, Cast) becomes the op
  -> Reshape: the op computes the same values on the 4-D tensor (and fuse_activation can fold
  it into the conv before it);
- Reshape -> Reshape becomes one Reshape to the second's shape, none where that is the first's
  input shape.
Consecutive convs are then joined directly, and to_nhwc keeps their tensors NHWC between them.
Only tensors read by the next op alone (not model outputs) are rewritten, and no op moves past
a tensor with a quantization-aware range (the tensor would hold other values).
"""
from __future__ import annotations

from mace.ir.args import set_arg
from mace.ir.qat_ranges import qat_ranges

ELEMENTWISE = {"Activation", "Eltwise", "Cast"}


def _movable(op) -> bool:
    """An element-wise op of one tensor input (a PRELU's slope or an Eltwise's second operand
    would have to be reshaped too)."""
    return op.type in ELEMENTWISE and len(op.input) == 1 and len(op.output) == 1


def _swap(graph, reshape, op) -> None:
    """reshape (a -> r) then op (r -> e) become op (a -> r) then a Reshape (r -> e)."""
    a, r, e = reshape.input[0], reshape.output[0], op.output[0]
    shape_a, shape_e, dtype_e = graph.shape(a), graph.shape(e), graph.dtype(e)
    moved = (op.type, list(op.arg), list(op.framework_op))
    for target, (kind, args, frameworks) in ((op, ("Reshape", list(reshape.arg), list(reshape.framework_op))),
                                             (reshape, moved)):
        target.type = kind
        del target.arg[:]
        target.arg.extend(args)
        del target.framework_op[:]
        target.framework_op.extend(frameworks)
    set_arg(op, "dims", list(shape_e))
    graph.specs[r] = (tuple(shape_a), dtype_e)


def fold_reshape_pairs(graph, options) -> bool:
    consumers = graph.consumers()
    outputs = set(graph.output_names)
    touched, removed, renamed = set(), set(), {}
    ranged = qat_ranges(graph.net)
    for op in graph.net.op:
        if op.type != "Reshape" or op.name in touched or len(op.input) != 1:
            continue
        r = op.output[0]
        readers = consumers.get(r, [])
        if r in outputs or len(readers) != 1 or readers[0].name in touched or op.input[0] not in graph.specs:
            continue
        nxt = readers[0]
        if _movable(nxt) and nxt.input[0] == r and r not in ranged:
            _swap(graph, op, nxt)
            touched.update((op.name, nxt.name))
        elif nxt.type == "Reshape" and nxt.input[0] == r and len(nxt.input) == 1:
            if graph.shape(nxt.output[0]) == graph.shape(op.input[0]) and nxt.output[0] not in outputs:
                renamed[nxt.output[0]] = op.input[0]   # the pair undoes itself
                removed.update((op.name, nxt.name))
            else:
                nxt.input[0] = op.input[0]
                set_arg(nxt, "dims", list(graph.shape(nxt.output[0])))
                removed.add(op.name)
            touched.update((op.name, nxt.name))
    if not (touched or removed):
        return False
    for op in graph.net.op:
        for i, name in enumerate(op.input):
            op.input[i] = renamed.get(name, name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return True
