"""Static shape inference: fill Graph.specs for every tensor from the input shapes.

Ops are visited in dependency order; each op type's `infer` (in its module in
mace/ops/) gives output shapes and dtypes (one op at a time: mace/ops/infer.py, which the
engine also uses when an input changes shape). A failure names the op.
"""
from __future__ import annotations

from mace.ir.dtypes import to_numpy
from mace.ir.graph import Graph
from mace.ir.order import topo_order
from mace.ops.infer import infer_op

__all__ = ["infer_shapes", "infer_op"]


def infer_shapes(graph: Graph) -> None:
    graph.specs = {i.name: (tuple(i.dims), to_numpy(i.data_type)) for i in graph.net.input_info}
    for op in topo_order(graph):
        infer_op(graph, op)
    graph.record_shapes()
