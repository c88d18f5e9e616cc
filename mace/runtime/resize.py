"""Inputs of other shapes than the converted ones: what `Engine.resize` checks and re-infers.

Only the dimensions the deployment file declared variable (input_shapes: -1..8,...; kept in
the model, mace/ir/shape_ranges.py) may change, within their ranges, and not those an op pinned
at convert (the reason names it). The new shapes flow through the graph with the ops' own
`infer` (mace/ops/infer.py) on a copy sharing the net and the constants; the engine then plans
its arena and binds its kernels for that copy as at load, once per shape signature.
"""
from __future__ import annotations

from mace.errors import ModelError, RuntimeInputError
from mace.ir.graph import Graph
from mace.ir.shape_ranges import shape_pins, shape_ranges
from mace.ops.infer import infer_op


def converted_shapes(graph: Graph) -> dict:
    """{input: shape} the model was converted at."""
    return {i.name: tuple(i.dims) for i in graph.net.input_info}


def varies(graph: Graph) -> bool:
    """Whether the model declares any variable input dimension."""
    return bool(shape_ranges(graph.net))


def check_shapes(graph: Graph, shapes: dict) -> None:
    """RuntimeInputError naming the input and dimension unless the model runs at `shapes`."""
    converted, ranges, pins = converted_shapes(graph), shape_ranges(graph.net), shape_pins(graph.net)
    unknown = sorted(set(shapes) - set(converted))
    if unknown:
        raise RuntimeInputError(f"unknown input tensor(s) {unknown}; the model's inputs are {sorted(converted)}")
    for name, shape in shapes.items():
        fixed = converted[name]
        if len(shape) != len(fixed):
            raise RuntimeInputError(f"input tensor '{name}': expected {len(fixed)} dimensions "
                                    f"(converted as {list(fixed)}), got {list(shape)}")
        for dim, (want, have) in enumerate(zip(shape, fixed)):
            if want != have:
                _check_dim(name, dim, want, have, ranges.get(name, {}), pins.get(name, {}))


def _check_dim(name, dim, want, have, ranges, pins) -> None:
    where = f"input tensor '{name}' dimension {dim}"
    if dim not in ranges:
        raise RuntimeInputError(f"{where} is fixed at {have} in this model, got {want} (declare it "
                                f"variable in the deployment file, e.g. input_shapes: {have}..{max(want, have)}, "
                                f"and convert again)")
    low, high = ranges[dim]
    if want < low or (high is not None and want > high):
        raise RuntimeInputError(f"{where}: {want} is outside its range {low}.."
                                f"{high if high is not None else ''} (the deployment file's input_shapes)")
    if dim in pins:
        raise RuntimeInputError(f"{where} stays {have} in the converted model: {pins[dim]}")


def reshaped_graph(graph: Graph, shapes: dict) -> Graph:
    """`graph` with every tensor's shape inferred again from input `shapes` (all inputs);
    the net and constants are shared, not copied (nothing here writes to them)."""
    copy = Graph(net=graph.net, consts=graph.consts, quant=graph.quant)
    copy.specs = {name: (tuple(int(d) for d in shapes[name]), graph.specs[name][1])
                  for name in graph.input_names}
    for op in graph.net.op:   # converted graphs are in execution order
        infer_op(copy, op)
    return copy


def check_recorded_shapes(graph: Graph, where) -> None:
    """ModelError unless every op output's shape recorded in a loaded model is the one the op
    computes from its inputs' (its own `infer`, from the model's input shapes). The kernels
    write into buffers of the recorded shapes: a .pb edited to record [127, 10] for an output
    the next op reads as [1, 10] rows had a compiled kernel write past its buffer (a heap
    corruption found by fuzzing, issue 38). An op whose shapes cannot be inferred here keeps
    its recorded ones (its kernel checks them)."""
    copy = Graph(net=graph.net, consts=graph.consts, quant=graph.quant)
    copy.specs = {name: graph.specs[name] for name in graph.input_names if name in graph.specs}
    for op in graph.net.op:
        try:
            infer_op(copy, op)
        except Exception:  # noqa: BLE001 - not ours to judge here: the recorded shapes stand
            copy.specs.update({t: graph.specs[t] for t in op.output if t in graph.specs})
            continue
        for t in op.output:
            if t in graph.specs and tuple(copy.specs[t][0]) != tuple(graph.specs[t][0]):
                raise ModelError(f"{where}: op '{op.name}' ({op.type}): the model records shape "
                                 f"{list(graph.specs[t][0])} for its output '{t}', but the op computes "
                                 f"{list(copy.specs[t][0])} from its inputs: a damaged or hand-edited model")
