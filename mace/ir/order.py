"""Execution order of a graph's ops: every op after the producers of its inputs.

Stable: among ready ops, the original order wins, so frontends' order survives.
"""
from __future__ import annotations

import heapq

from mace.errors import ModelError


def topo_order(graph) -> list:
    ops = list(graph.net.op)
    producer = {t: i for i, op in enumerate(ops) for t in op.output}
    deps = [{producer[t] for t in op.input if t in producer and producer[t] != i}
            for i, op in enumerate(ops)]
    users = [[] for _ in ops]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    pending = [len(d) for d in deps]
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(ops[i])
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(ops):
        stuck = [ops[i].name for i, n in enumerate(pending) if n > 0][:5]
        raise ModelError(f"the graph has a cycle (ops involved include {stuck})")
    return order
