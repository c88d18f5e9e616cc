"""Build small IR graphs by hand (no framework) and run them on the CPU engine."""
from __future__ import annotations

import numpy as np

from mace.frontends.base import add_input_info, add_output_info
from mace.config.specs import TensorSpec
from mace.ir.graph import Graph
from mace.runtime.engine import Engine
from mace.transform.pipeline import transform
from mace.transform.shape_inference import infer_shapes


def make_graph(x_shape, ops, consts=None, outputs=("y",)):
    """A Graph with float input 'x' and `ops`: (type, inputs, outputs, args) tuples."""
    return graph_of({"x": x_shape}, ops, consts, outputs)


def graph_of(inputs: dict, ops, consts=None, outputs=("y",)):
    """A Graph with inputs {name: shape}, constants {name: array} and `ops`: (type,
    inputs, outputs, args) tuples, shapes inferred."""
    graph = Graph()
    for name, shape in inputs.items():
        add_input_info(graph, TensorSpec(name, tuple(shape), "NONE"))
    for name, value in (consts or {}).items():
        graph.add_const(name, value)
    for op_type, inputs, outs, args in ops:
        graph.add_op(op_type, inputs, outs, **args)
    for name in outputs:
        add_output_info(graph, TensorSpec(name, None, "NONE"))
    infer_shapes(graph)
    return graph


def run_graph(graph, x, options=None, optimise=True):
    if optimise:
        transform(graph, options)
    return Engine(graph).run({"x": np.asarray(x, np.float32)}), graph
