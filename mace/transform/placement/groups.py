"""The placement of a converted graph as groups and transfers (shown by run, reports, benchmark).

A group is a contiguous run of ops (in execution order) on one runtime, read
from OperatorDef.device_type. A transfer is a tensor made on one runtime and
read on another: once per (tensor, runtime it moves to), as the engines move it
(the GPU runtime uploads a host tensor before its first GPU reader and
downloads a GPU result that the host reads; mace/runtime/gpu/runtime.py).
Model inputs start on the host (cpu) and outputs end there.
"""
from __future__ import annotations

from dataclasses import dataclass


from mace.proto import pb
from mace.util.text import si, table

HOST = "cpu"
NAMES = {pb.CPU: "cpu", pb.GPU: "gpu", pb.HEXAGON: "dsp"}


@dataclass
class Group:
    index: int
    runtime: str
    first: int          # op indices, inclusive
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    @property
    def label(self) -> str:
        ops = f"op {self.first}" if self.first == self.last else f"ops {self.first}-{self.last}"
        return f"#{self.index} {self.runtime} {ops}"


@dataclass
class Transfer:
    tensor: str
    src: str             # runtime
    dst: str
    nbytes: int
    src_group: int | None   # None: a model input
    dst_group: int | None   # None: a model output

    @property
    def label(self) -> str:
        a = "input" if self.src_group is None else f"#{self.src_group}"
        b = "output" if self.dst_group is None else f"#{self.dst_group}"
        return f"{self.tensor} {self.src}->{self.dst} ({a}->{b}, {self.nbytes} B)"


def runtime_of(op) -> str:
    return NAMES.get(op.device_type, pb.DeviceType.Name(op.device_type).lower())


def groups(graph) -> list:
    result = []
    for i, op in enumerate(graph.net.op):
        rt = runtime_of(op)
        if result and result[-1].runtime == rt:
            result[-1].last = i
        else:
            result.append(Group(len(result), rt, i, i))
    return result


def group_of_ops(graph) -> list:
    """Group index per op index."""
    return [g.index for g in groups(graph) for _ in range(g.count)]


def transfers(graph) -> list:
    ops = list(graph.net.op)
    member = group_of_ops(graph)
    made = {t: i for i, op in enumerate(ops) for t in op.output}
    moves, seen = [], set()
    for i, op in enumerate(ops):
        dst = runtime_of(op)
        for t in op.input:
            if t in graph.consts:
                continue
            src = runtime_of(ops[made[t]]) if t in made else HOST
            if src != dst and (t, dst) not in seen:
                seen.add((t, dst))
                moves.append(Transfer(t, src, dst, graph.nbytes(t),
                                      member[made[t]] if t in made else None, member[i]))
    for t in graph.output_names:
        if t in made and runtime_of(ops[made[t]]) != HOST:
            moves.append(Transfer(t, runtime_of(ops[made[t]]), HOST, graph.nbytes(t), member[made[t]], None))
    return moves


def runtimes(graph) -> list:
    return sorted({runtime_of(op) for op in graph.net.op})


def is_mixed(graph) -> bool:
    return len(runtimes(graph)) > 1


def describe(graph, limit: int = 12) -> list:
    """Lines for `run`: the groups and the transfers between them (mixed placements only)."""
    if not is_mixed(graph):
        return []
    gs, moves = groups(graph), transfers(graph)
    more = f", ... {len(moves) - limit} more" if len(moves) > limit else ""
    return [f"placement groups ({len(gs)}): " + ", ".join(g.label for g in gs),
            f"transfers ({len(moves)}): " + (", ".join(m.label for m in moves[:limit]) + more
                                              if moves else "none")]


def report_lines(graph, layers: list) -> list:
    """The offline report's Placement section (mixed placements only); `layers`: OpStatic per op."""
    if not is_mixed(graph):
        return []
    gs = groups(graph)
    rows = [[f"#{g.index}", g.runtime, f"{g.first}-{g.last}" if g.count > 1 else str(g.first), g.count,
             si(sum(s.ops for s in layers[g.first:g.last + 1]))] for g in gs]
    moves = transfers(graph)
    return ([f"Placement: {len(gs)} groups on {', '.join(runtimes(graph))}, {len(moves)} transfers"]
            + table(["group", "runtime", "ops", "#layers", "#ops"], rows, right={3, 4})
            + [""]
            + table(["transfer", "from", "to", "bytes"],
                    [[m.tensor, "input" if m.src_group is None else f"#{m.src_group} {m.src}",
                      "output" if m.dst_group is None else f"#{m.dst_group} {m.dst}", m.nbytes]
                     for m in moves], right={3}))
