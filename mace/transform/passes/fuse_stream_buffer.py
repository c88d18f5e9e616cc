"""fuse_stream_buffer: a streaming layer's ReadVariable -> Concat -> StridedSlice ->
AssignVariable becomes one StreamBuffer (mace/ops/stream_buffer.py).

TensorFlow's Stream layers (microWakeWord's streaming TFLite files: seven per model) keep each
layer's last K input frames in a variable: the Concat puts the K old frames before the T new
ones, the layer reads the Concat, and the StridedSlice of its last K frames is assigned back.
Four nodes of ~0.5 us dispatch each for a few hundred floats; the fused op is one.

Fused only where nothing else can tell: the variable is read by that one ReadVariable and
written by that one AssignVariable (whose initial value is a constant), the read value goes
only to the Concat (first input) and the assignment's ordering input, the slice is exactly the
Concat's last K entries along its axis (K the variable's length there, step 1, every other
axis whole) and is read only by the assignment, and neither is a model output. Runs after the
layout passes (the axis is final) and only for CPU float models, like the other CPU fusions.
"""
from __future__ import annotations

from collections import defaultdict

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis
from mace.ops.strided_slice import slices
from mace.transform.passes._patterns import only_reader
from mace.transform.passes.fuse_hardswish import cpu_float
from mace.transform.shape_inference import infer_shapes


def _by_variable(ops) -> tuple:
    """({variable: [ReadVariable ops]}, {variable: [AssignVariable ops]})."""
    reads, writes = defaultdict(list), defaultdict(list)
    for op in ops:
        if op.type in ("ReadVariable", "AssignVariable"):
            (reads if op.type == "ReadVariable" else writes)[get_arg(op, "variable", "")].append(op)
    return reads, writes


def _last_entries(graph, sliced, axis: int, keep: int) -> bool:
    """Whether StridedSlice `sliced` takes exactly the last `keep` entries along `axis` of its
    input, step 1, every other axis whole."""
    shape = graph.shape(sliced.input[0])
    if shape is None or len(sliced.input) != 1:
        return False
    try:
        index, _ = slices(lambda k, d=None: get_arg(sliced, k, d), shape, sliced.name)
    except ValueError:
        return False
    for a, (s, dim) in enumerate(zip(index, shape)):
        want = (dim - keep, dim) if a == axis else (0, dim)
        if s.indices(dim) != (*want, 1):
            return False
    return True


def _match(graph, read, write, consumers, producers, outputs):
    """The (concat, slice) of one stream buffer around variable read `read` / write `write`, or None."""
    value = read.output[0]
    readers = consumers.get(value, [])
    concat = next((op for op in readers if op.type == "Concat"), None)
    if (concat is None or value in outputs or len(readers) != 2 or not any(op is write for op in readers)
            or len(concat.input) != 2 or concat.input[0] != value or concat.input[1] == value
            or len(write.input) < 3 or write.input[2] != value or write.input[1] not in graph.consts):
        return None
    shape, out_shape = graph.shape(value), graph.shape(concat.output[0])
    if shape is None or out_shape is None or len(shape) != len(out_shape):
        return None
    axis = normalize_axis(get_arg(concat, "axis"), len(shape))
    sliced = producers.get(write.input[0])
    if (sliced is None or sliced.type != "StridedSlice" or sliced.input[0] != concat.output[0]
            or only_reader(consumers, outputs, sliced.output[0]) is not write
            or not _last_entries(graph, sliced, axis, shape[axis])):
        return None
    return concat, sliced


def fuse_stream_buffer(graph, options) -> bool:
    if not cpu_float(options):
        return False
    consumers, producers, outputs = graph.consumers(), graph.producers(), set(graph.output_names)
    reads, writes = _by_variable(graph.net.op)
    removed = set()
    for variable, read in reads.items():
        write = writes.get(variable, [])
        if len(read) != 1 or len(write) != 1:   # the one read and the one write, or nothing
            continue
        (read,), (write,) = read, write
        found = _match(graph, read, write, consumers, producers, outputs)
        if found is None:
            continue
        concat, sliced = found
        axis = get_arg(concat, "axis")
        concat.type = "StreamBuffer"
        concat.input[:] = [concat.input[1], write.input[1]]
        del concat.arg[:]
        set_arg(concat, "axis", axis)
        set_arg(concat, "variable", variable)
        for op in (read, sliced, write):
            concat.framework_op.extend(op.framework_op)
            removed.add(op.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
        infer_shapes(graph)
    return bool(removed)
