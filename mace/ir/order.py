"""Execution order of a graph's ops: every op after the producers of its inputs.

Stable: among ready ops, the original order wins, so frontends' order survives.
"""
from __future__ import annotations

import heapq

from mace.errors import ModelError


def stable_order(deps: list) -> tuple:
    """(order, stuck) of items 0..n-1 where item i must come after every item in deps[i]:
    order lists each item once its deps are placed, the lowest index first among the ready
    (so a sorted list keeps its order); stuck lists, in index order, the items a cycle holds."""
    users = [[] for _ in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    pending = [len(d) for d in deps]
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    return order, [i for i, n in enumerate(pending) if n > 0]


def topo_order(graph) -> list:
    ops = list(graph.net.op)
    producer = {t: i for i, op in enumerate(ops) for t in op.output}
    deps = [{producer[t] for t in op.input if t in producer and producer[t] != i}
            for i, op in enumerate(ops)]
    order, stuck = stable_order(deps)
    if stuck:
        raise ModelError(f"the graph has a cycle (ops involved include {[ops[i].name for i in stuck[:5]]})")
    return [ops[i] for i in order]
