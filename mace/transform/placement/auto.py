"""`placement: auto`: each op to the first runtime of a preference list that can run it,
then moves that save more in transfers than they cost (docs/placement.md).

Only runtimes with a kernel for an op (mace/transform/placement/plan.py can_run) are
ever considered for it; an op none of them can run is an error naming it.

Cost model, one unit for both terms (UNIT = 64 Ki ops or bytes):
  running an op on the k-th runtime of the list (0 = first) costs
      k * (1 + ops / UNIT)               ops: mace/ir/opstats.py count_ops
  every tensor moving between runtimes costs, per runtime it moves to,
      1 + bytes / UNIT                    (model inputs start, and outputs end, on the CPU)
Starting from the first-choice placement, the search moves a single op, or a whole
connected run of ops on one runtime, to another runtime they all support whenever
that lowers the total; it stops when no such move is left (the total strictly
falls, so it ends). A light op between two CPU-only ops stays on the CPU, a heavy
convolution there still goes to the GPU.
"""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError
from mace.ir.opstats import count_macs, count_ops

UNIT = 65536.0
HOST = "cpu"


class _Costs:
    def __init__(self, graph, ops, runtime, candidates, preference):
        self.graph, self.ops, self.runtime = graph, ops, runtime
        self.candidates, self.rank = candidates, {r: k for k, r in enumerate(preference)}
        self.work = {i: 1.0 + count_ops(ops[i], graph, count_macs(ops[i], graph)) / UNIT
                     for i in candidates}
        self.producer = {t: i for i, op in enumerate(ops) for t in op.output}
        self.readers = {}
        for i, op in enumerate(ops):
            for t in op.input:
                if t not in graph.consts:
                    self.readers.setdefault(t, []).append(i)
        self.outputs = set(graph.output_names)

    def on(self, i) -> str:
        return self.runtime[i] or HOST   # not placed yet (another auto subgraph): the CPU

    def tensor(self, t) -> float:
        src = self.on(self.producer[t]) if t in self.producer else HOST
        dst = {self.on(j) for j in self.readers.get(t, [])}
        if t in self.outputs:
            dst.add(HOST)
        dst.discard(src)
        if not dst:
            return 0.0
        shape, dtype = self.graph.specs.get(t, ((), np.float32))
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        return len(dst) * (1.0 + nbytes / UNIT)

    def local(self, group) -> float:
        """The cost terms that change when the ops of `group` move."""
        touched = {t for i in group for t in list(self.ops[i].input) + list(self.ops[i].output)
                   if t not in self.graph.consts}
        unary = sum(self.rank[self.runtime[i]] * self.work[i] for i in group)
        return unary + sum(self.tensor(t) for t in touched)


def auto_place(graph, mine: list, preference: list, check, where: str, runtime: list) -> dict:
    """Choose a runtime for each op index in `mine` (runtime: the list of every op's runtime so
    far, None where not decided; updated in place). Returns {index: runtime}."""
    ops = list(graph.net.op)
    candidates, refused = {}, []
    for i in mine:
        why = {r: check(ops[i], r) for r in preference}
        candidates[i] = [r for r in preference if why[r] is None]
        if not candidates[i]:
            refused.append(f"op '{ops[i].name}' ({ops[i].type}): "
                           + "; ".join(f"{r}: {w}" for r, w in why.items()))
    if refused:
        raise ModelError(f"{where}: no runtime of placement_preference {preference} can run "
                         f"{len(refused)} op(s):\n  " + "\n  ".join(refused))
    for i in mine:
        runtime[i] = candidates[i][0]
    costs = _Costs(graph, ops, runtime, candidates, preference)
    for _ in range(4 * len(mine) + 4):
        if not _improve(costs, mine):
            break
    return {i: runtime[i] for i in mine}


def _groups(costs, mine) -> list:
    """Singletons, then connected runs of ops on one runtime (through the tensors they share)."""
    runtime, parent = costs.runtime, {i: i for i in mine}

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for i in mine:
        for t in costs.ops[i].input:
            j = costs.producer.get(t)
            if j in parent and runtime[j] == runtime[i]:
                parent[find(i)] = find(j)
    runs = {}
    for i in mine:
        runs.setdefault(find(i), []).append(i)
    return [[i] for i in mine] + [g for g in runs.values() if len(g) > 1]


def _improve(costs, mine) -> bool:
    """Apply the first move that lowers the total; False when none does."""
    runtime = costs.runtime
    for group in _groups(costs, mine):
        common = set.intersection(*(set(costs.candidates[i]) for i in group))
        before = [runtime[i] for i in group]
        old = costs.local(group)
        for r in sorted(common - set(before), key=costs.rank.get):
            for i in group:
                runtime[i] = r
            if costs.local(group) < old - 1e-9:
                return True
            for i, b in zip(group, before):
                runtime[i] = b
    return False
