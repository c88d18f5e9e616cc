"""The engine: builds kernels and buffers once at load, then runs the graph.

    engine = create_engine("model.pb")          # or Engine(graph)
    outputs = engine.run({"input": array})       # dict name -> ndarray

Every intermediate tensor lives in one arena laid out by the memory planner;
graph inputs and outputs get buffers of their own so they survive the run.
Kernels come from the op registry by an ordered tag list ("cpu" is the numpy
reference). Observers (callables) see every node before and after it runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace.errors import RuntimeInputError
from mace.ir.graph import Graph
from mace.ir.model_io import load_model
from mace.ops.registry import KernelContext, select_kernel
from mace.runtime.memory_planner import MemoryPlan, TensorLife, plan_memory

DEVICE_TAGS = {"cpu": ["cpu"]}


@dataclass
class Node:
    index: int
    op: object          # the OperatorDef
    kernel: object
    tag: str            # which kernel variant runs it
    inputs: list = field(default_factory=list)   # ndarrays (consts or arena views)
    outputs: list = field(default_factory=list)  # ndarrays (arena views)


class Engine:
    def __init__(self, graph: Graph, device: str = "cpu", options: dict | None = None):
        self.graph = graph
        self.device = device
        self.options = options or {}
        self.observers = []
        self.tags = DEVICE_TAGS.get(device, [device, "cpu"])
        self.plan = self._plan()
        self.arena = np.zeros(self.plan.arena_size, np.uint8)
        self.buffers = self._bind_buffers()
        self.nodes = [self._build_node(i, op) for i, op in enumerate(graph.net.op)]

    # ---- load ----------------------------------------------------------
    def _nbytes(self, name: str) -> int:
        shape, dtype = self.graph.specs[name]
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize

    def tensor_lives(self) -> list:
        """Lifetimes of every non-constant tensor in execution order."""
        ops, last = self.graph.net.op, len(self.graph.net.op)
        first_use = {name: -1 for name in self.graph.input_names}
        last_use = dict.fromkeys(self.graph.input_names, -1)
        for i, op in enumerate(ops):
            for t in op.output:
                first_use.setdefault(t, i)
                last_use[t] = max(last_use.get(t, i), i)
            for t in op.input:
                if t in last_use:
                    last_use[t] = i
        for name in list(self.graph.input_names) + list(self.graph.output_names):
            last_use[name] = last  # the caller's tensors outlive the run
        return [TensorLife(n, self._nbytes(n), first_use[n], last_use[n]) for n in first_use]

    def _plan(self) -> MemoryPlan:
        return plan_memory(self.tensor_lives())

    def _bind_buffers(self) -> dict:
        bufs = {}
        for name, offset in self.plan.offsets.items():
            shape, dtype = self.graph.specs[name]
            bufs[name] = np.ndarray(shape, dtype=dtype, buffer=self.arena, offset=offset)
        return bufs

    def _tensor(self, name: str) -> np.ndarray:
        if name in self.graph.consts:
            return self.graph.consts[name]
        return self.buffers[name]

    def _build_node(self, index: int, op) -> Node:
        g = self.graph
        ins = [self._tensor(t) for t in op.input]
        ctx = KernelContext(
            op=op,
            input_shapes=[tuple(x.shape) for x in ins],
            input_dtypes=[x.dtype for x in ins],
            output_shapes=[tuple(g.specs[t][0]) for t in op.output],
            output_dtypes=[np.dtype(g.specs[t][1]) for t in op.output],
            consts=[g.consts.get(t) for t in op.input],
            options=self.options,
        )
        cls, tag = select_kernel(op.type, self.tags)
        try:
            kern = cls(ctx)
        except Exception as e:
            raise RuntimeError(f"cannot prepare op '{op.name}' ({op.type}): {e}") from e
        return Node(index, op, kern, tag, ins, [self.buffers[t] for t in op.output])

    # ---- run -----------------------------------------------------------
    def input_specs(self) -> dict:
        return {n: self.graph.specs[n] for n in self.graph.input_names}

    def output_specs(self) -> dict:
        return {n: self.graph.specs[n] for n in self.graph.output_names}

    def set_inputs(self, inputs: dict) -> None:
        specs = self.input_specs()
        unknown = set(inputs) - set(specs)
        if unknown:
            raise RuntimeInputError(f"unknown input tensor(s) {sorted(unknown)}; "
                                    f"the model's inputs are {sorted(specs)}")
        for name, (shape, _) in specs.items():
            if name not in inputs:
                raise RuntimeInputError(f"missing input tensor '{name}' (shape {list(shape)})")
            value = np.asarray(inputs[name])
            if tuple(value.shape) != tuple(shape):
                raise RuntimeInputError(f"input tensor '{name}': expected shape {list(shape)}, "
                                        f"got {list(value.shape)}")
            np.copyto(self.buffers[name], value, casting="unsafe")

    def run(self, inputs: dict) -> dict:
        """Run once; returns a fresh dict of output arrays (copies)."""
        self.set_inputs(inputs)
        observers = self.observers
        for node in self.nodes:
            for obs in observers:
                obs("before", node, self)
            try:
                node.kernel.run(node.inputs, node.outputs)
            except Exception as e:
                raise RuntimeError(f"op '{node.op.name}' ({node.op.type}) failed: {e}") from e
            for obs in observers:
                obs("after", node, self)
        return {n: np.array(self._tensor(n)) for n in self.graph.output_names}


def create_engine(pb_path, data_path=None, device: str = "cpu", options: dict | None = None) -> Engine:
    """Load a converted model (.pb + .data) and build an engine for it."""
    graph = load_model(Path(pb_path), Path(data_path) if data_path else None)
    return Engine(graph, device=device, options=options)
