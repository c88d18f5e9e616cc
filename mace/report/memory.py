"""The engine's memory plan, computed from a graph alone (for reports written at convert time).

Tensor lifetimes follow Engine.tensor_lives: graph inputs live from before the
first op, graph outputs to after the last, every other tensor from the op that
writes it to the last op that reads it. tests/reports check that the arena size
here equals the engine's, so a change of the engine's planning shows up there.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mace.runtime.memory_planner import MemoryPlan, TensorLife, plan_memory


@dataclass
class MemoryTimeline:
    plan: MemoryPlan
    lives: list                                   # TensorLife per arena tensor
    live_bytes: list = field(default_factory=list)  # per step (op index): bytes of live tensors


def _nbytes(graph, name) -> int:
    shape, dtype = graph.specs[name]
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def tensor_lives(graph) -> list:
    ops, last = graph.net.op, len(graph.net.op)
    first_use = {name: -1 for name in graph.input_names}
    last_use = dict.fromkeys(graph.input_names, -1)
    for i, op in enumerate(ops):
        for t in op.output:
            first_use.setdefault(t, i)
            last_use[t] = max(last_use.get(t, i), i)
        for t in op.input:
            if t in last_use:
                last_use[t] = i
    for name in list(graph.input_names) + list(graph.output_names):
        last_use[name] = last  # the caller's tensors outlive the run
    return [TensorLife(n, _nbytes(graph, n), first_use[n], last_use[n]) for n in first_use]


def memory_timeline(graph) -> MemoryTimeline:
    lives = tensor_lives(graph)
    plan = plan_memory(lives)
    steps = range(len(graph.net.op))
    live = [sum(t.size for t in lives if t.first <= s <= t.last) for s in steps]
    return MemoryTimeline(plan, lives, live)
