"""The engine's memory plan, computed from a graph alone (for reports written at convert time).

Tensor lifetimes are the engine's own (memory_planner.tensor_lives): graph inputs live from before the
first op, graph outputs to after the last, every other tensor from the op that
writes it to the last op that reads it. tests/report check that the arena size
here equals the engine's, so a change of the engine's planning shows up there.
"""
from __future__ import annotations

from dataclasses import dataclass, field


from mace.runtime.memory_planner import MemoryPlan, plan_memory, tensor_lives


@dataclass
class MemoryTimeline:
    plan: MemoryPlan
    lives: list                                   # TensorLife per arena tensor
    live_bytes: list = field(default_factory=list)  # per step (op index): bytes of live tensors


def memory_timeline(graph) -> MemoryTimeline:
    lives = tensor_lives(graph)
    plan = plan_memory(lives)
    steps = range(len(graph.net.op))
    live = [sum(t.size for t in lives if t.first <= s <= t.last) for s in steps]
    return MemoryTimeline(plan, lives, live)
