"""sort_topologically: order ops so every op runs after the producers of its inputs.

The order itself is mace/ir/order.py's (shape inference uses it too).
"""
from __future__ import annotations

from mace.ir.order import topo_order


def sort_topologically(graph, options) -> bool:
    order = topo_order(graph)
    changed = [op.name for op in order] != [op.name for op in graph.net.op]
    if changed:
        graph.set_ops(order)
    return changed
