"""What the frontends call after adding a node's ops: fold them or give them shapes."""
from __future__ import annotations

from mace.ir.graph import Graph
from mace.transform.passes.fold_constants import try_fold
from mace.transform.shape_inference import infer_op


def settle_new_ops(graph: Graph, first: int, keep=()) -> None:
    """Fold or shape the ops appended since index `first` (frontends call this per node).

    Ops computable from constants become constants at once, so later nodes see
    static values (ONNX Shape->Gather->Reshape chains); the rest get shapes.
    `keep` names tensors (model outputs) that must stay produced by an op.
    """
    kept = []
    for op in list(graph.net.op[first:]):
        infer_op(graph, op)
        if set(op.output) & set(keep) or not try_fold(graph, op):
            kept.append(op)
    if len(kept) != len(graph.net.op) - first:
        graph.set_ops(list(graph.net.op[:first]) + kept)
