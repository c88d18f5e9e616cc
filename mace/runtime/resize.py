"""Inputs of other shapes than the converted ones: what `Engine.resize` checks and re-infers.

Only the dimensions the deployment file declared variable (input_shapes: -1..8,...; kept in
the model, mace/ir/shape_ranges.py) may change, within their ranges, and not those an op pinned
at convert (the reason names it). The new shapes flow through the graph with the ops' own
`infer` (mace/ops/infer.py) on a copy sharing the net and the constants; the engine then plans
its arena and binds its kernels for that copy as at load, once per shape signature.
"""
from __future__ import annotations

from mace.errors import RuntimeInputError
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
