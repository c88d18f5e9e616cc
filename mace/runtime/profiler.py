"""Per-op timing built on the engine's observer hook (no special case inside the engine)."""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class OpStat:
    index: int
    name: str
    type: str
    kernel: str        # the kernel variant's tag, and its algorithm (Node.kernel_name)
    output_shape: list
    calls: int
    avg_ms: float


class OpProfiler:
    """Attach with `engine.observers.append(profiler)`; read `stats()` after runs."""

    def __init__(self):
        self._start = {}
        self._total = defaultdict(float)
        self._calls = defaultdict(int)
        self._nodes = {}

    def __call__(self, event: str, node, engine) -> None:
        if event == "before":
            self._start[node.index] = time.perf_counter()
        elif event == "after":
            self._total[node.index] += time.perf_counter() - self._start.pop(node.index)
            self._calls[node.index] += 1
            self._nodes[node.index] = node

    def stats(self) -> list:
        result = []
        for i in sorted(self._nodes):
            node = self._nodes[i]
            shape = list(node.outputs[0].shape) if node.outputs else []
            result.append(OpStat(i, node.op.name, node.op.type, node.kernel_name, shape, self._calls[i],
                                 1000.0 * self._total[i] / self._calls[i]))
        return result
