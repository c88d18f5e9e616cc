"""Static shape inference: fill Graph.specs for every tensor from the input shapes.

Ops are visited in dependency order; each op type's `infer` (in its module in
mace/ops/) gives output shapes and dtypes. A failure names the op.
"""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError
from mace.ir.dtypes import to_numpy
from mace.ir.graph import Graph
from mace.ir.order import topo_order
from mace.ops.registry import InferContext, spec


def infer_shapes(graph: Graph) -> None:
    graph.specs = {i.name: (tuple(i.dims), to_numpy(i.data_type)) for i in graph.net.input_info}
    for op in topo_order(graph):
        infer_op(graph, op)
    graph.record_shapes()


def infer_op(graph: Graph, op) -> None:
    """Infer and record the output shapes of one op whose inputs are known."""
    shapes, dtypes, values = [], [], []
    for t in op.input:
        if t in graph.consts:
            v = graph.consts[t]
            shapes.append(tuple(v.shape))
            dtypes.append(v.dtype)
            values.append(v)
        elif t in graph.specs:
            s, d = graph.specs[t]
            shapes.append(tuple(s))
            dtypes.append(np.dtype(d))
            values.append(None)
        else:
            raise ModelError(f"op '{op.name}' ({op.type}) reads tensor '{t}', "
                             f"which no op produces and is not a model input")
    try:
        outs = spec(op.type).infer(InferContext(op, shapes, dtypes, values))
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"shape inference failed at op '{op.name}' ({op.type}) "
                         f"with input shapes {[list(s) for s in shapes]}: {e}") from None
    for t, (shape, dtype) in zip(op.output, outs):
        graph.specs[t] = (tuple(int(d) for d in shape), np.dtype(dtype))
