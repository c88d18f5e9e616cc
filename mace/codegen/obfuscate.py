"""`obfuscate: 1`: replace op names and internal tensor names with opaque ids.

Runs once on the optimised Graph, before anything is written, so every writer
(.pb, .pb_txt, generated code, reports) sees the same opaque names. Graph
input and output names are kept: callers feed and read tensors by them.
Ids are given in execution order, so the same model always gets the same ids.
"""
from __future__ import annotations

import json
from pathlib import Path

from mace.ir.graph import Graph
from mace.ir.layouts import ARG as PERMS_ARG, record_perms, stored_perms
from mace.ir.ragged import ragged_outputs, record_ragged_outputs


def obfuscate_graph(graph: Graph) -> dict:
    """Rename in place; returns {"ops"|"tensors"|"framework_ops": {opaque id: original name}}."""
    kept = set(graph.input_names) | set(graph.output_names)
    tensors, ops, fw = {}, {}, {}

    def tensor(name):
        if name in kept or not name:  # "" marks an absent optional input
            return name
        return _new_id(tensors, name, "t", kept)

    for op in graph.net.op:
        op.name = _new_id(ops, op.name, "op", kept)
        for i, t in enumerate(op.input):
            op.input[i] = tensor(t)
        for i, t in enumerate(op.output):
            op.output[i] = tensor(t)
        for i, f in enumerate(op.framework_op):
            op.framework_op[i] = _new_id(fw, f, "fw", kept)
    # consts nobody reads keep the .data layout: rename them too, in their own order
    graph.consts = {tensor(n): v for n, v in graph.consts.items()}
    graph.quant = {tensor(n): p for n, p in graph.quant.items()}
    graph.specs = {tensor(n): v for n, v in graph.specs.items()}
    _rename_perms(graph, tensors)
    _rename_ragged(graph, tensors)
    return {"ops": _invert(ops), "tensors": _invert(tensors), "framework_ops": _invert(fw)}


def _rename_ragged(graph: Graph, tensors: dict) -> None:
    """The ragged_outputs net argument names each data-dependent output's length tensor."""
    ragged = ragged_outputs(graph.net)
    if ragged:
        record_ragged_outputs(graph.net, {n: (tensors.get(t, t), a) for n, (t, a) in ragged.items()})


def _rename_perms(graph: Graph, tensors: dict) -> None:
    """The stored_perms net argument is keyed by tensor names; tensors a pass removed are dropped."""
    perms = stored_perms(graph.net)
    if perms or any(a.name == PERMS_ARG for a in graph.net.arg):
        kept = set(graph.input_names) | set(graph.output_names)
        record_perms(graph, {tensors.get(n, n): p for n, p in perms.items() if n in tensors or n in kept})


def _new_id(ids: dict, name: str, prefix: str, kept: set) -> str:
    """The id of `name`, made on first sight; never one of the kept input/output names."""
    if name not in ids:
        n, taken = len(ids), set(ids.values())
        while f"{prefix}{n}" in kept or f"{prefix}{n}" in taken:
            n += 1
        ids[name] = f"{prefix}{n}"
    return ids[name]


def _invert(mapping: dict) -> dict:
    return {new: old for old, new in mapping.items()}


def write_map(mapping: dict, path: Path) -> None:
    """The owner's key back to the original names (never shipped with the model)."""
    Path(path).write_text(json.dumps(mapping, indent=1, sort_keys=True) + "\n")
