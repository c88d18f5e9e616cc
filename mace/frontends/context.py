"""The mapping context every frontend's mapping functions get: the graph being built and how a
framework node becomes IR ops, constants and temporary tensors.

What differs between frameworks is how a node names itself and its tensors; a frontend's context
(OnnxContext, TfContext, TflContext, CaffeContext) says that in four small methods and adds its
own readers (attributes, options, weights):

  op_name(node)   the node's name, recorded on each IR op it becomes (`framework_op`)
  op_type(node)   its type, as error messages name it
  inp(node, i)    the IR name of its input i (None where left out)
  out(node, i)    the IR name of its output i
"""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError
from mace.ir.graph import Graph
from mace.transform.shape_inference import infer_op


class MappingContext:
    """What a mapping function sees, whatever the framework: the graph, the names the framework's
    tensors have in it (`rename`: inputs moved to another layout, outputs that alias another
    tensor) and the model outputs, which must stay produced by an op (`keep`)."""

    # how `static` says that an input is not known while converting
    NOT_STATIC = "must be static (computable from constants and input shapes)"

    def __init__(self, graph: Graph, keep=()):
        self.graph = graph
        self.keep = set(keep)
        self.rename = {}

    # ---- how the framework names things (each frontend's context says) ----------------
    def op_name(self, node) -> str:
        raise NotImplementedError

    def op_type(self, node) -> str:
        raise NotImplementedError

    def inp(self, node, i: int):
        """The IR name of input i of `node`, or None where it is left out."""
        raise NotImplementedError

    def out(self, node, i: int = 0) -> str:
        raise NotImplementedError

    def default_outputs(self, node) -> list:
        return [self.out(node)]

    def temp_stem(self, node) -> str:
        """What temporary tensors of `node` are named after."""
        return self.op_name(node)

    def ir_name(self, node) -> str:
        """The name of an IR op made for `node` when the mapping gives none."""
        return self.op_name(node)

    # ---- tensors ---------------------------------------------------------------------
    def name(self, t: str) -> str:
        """The IR tensor holding the framework's tensor `t`."""
        return self.rename.get(t, t)

    def const(self, name):
        """The value of tensor `name` where it is constant (None if not, or if `name` is None)."""
        return None if name is None else self.graph.consts.get(name)

    def shape(self, name) -> tuple:
        """Static shape of a tensor converted so far (constants fold as nodes arrive)."""
        return self.graph.shape(name)

    def dtype(self, name) -> np.dtype:
        return self.graph.dtype(name)

    def unique(self, base: str) -> str:
        return self.graph.unique_name(base)

    def temp(self, node, suffix: str) -> str:
        """A fresh tensor name for an intermediate result of `node`."""
        return self.unique(f"{self.temp_stem(node)}_{suffix}")

    def add_const(self, name: str, value) -> str:
        return self.graph.add_const(name, np.asarray(value))

    def new_const(self, node, suffix: str, value) -> str:
        """A constant of `node` under a fresh name (its weights, a scalar operand)."""
        return self.add_const(self.temp(node, suffix), value)

    # ---- ops -------------------------------------------------------------------------
    def add(self, op_type: str, node, inputs, outputs=None, name=None, **args):
        """Add an IR op for `node`; outputs default to `default_outputs(node)`."""
        outputs = self.default_outputs(node) if outputs is None else outputs
        op = self.graph.add_op(op_type, inputs, outputs, name=name or self.ir_name(node),
                               framework_op=[self.op_name(node)], **args)
        infer_op(self.graph, op)  # later ops of the same node may ask for its shape
        return op

    def alias(self, node, i: int, source: str) -> None:
        """Output i of `node` is `source` (no op needed), unless it is a model output."""
        out = self.out(node, i)
        if out in self.keep:
            self.add("Identity", node, [source], [out], name=self.temp(node, f"out{i}"))
        else:
            self.rename[out] = source

    # ---- errors and static inputs ----------------------------------------------------
    def fail(self, node, message: str) -> ModelError:
        return ModelError(f"{self.op_type(node)} '{self.op_name(node)}': {message}")

    def static(self, node, i: int, what: str) -> np.ndarray:
        """Input i of `node` as a constant array; it must be known while converting."""
        v = self.const(self.inp(node, i))
        if v is None:
            raise self.fail(node, f"{what} {self.NOT_STATIC}")
        return np.asarray(v)

    def static_ints(self, node, i: int, what: str) -> list:
        return [int(d) for d in self.static(node, i, what).reshape(-1)]
