"""What running a model gives back: timing, outputs, metrics and notes (host or device)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Timing:
    init_ms: float
    warmup_ms: float
    rounds: int = 0
    avg_ms: float = 0.0
    median_ms: float = 0.0
    min_ms: float = 0.0
    max_ms: float = 0.0
    std_ms: float = 0.0


@dataclass
class ModelRunResult:
    model: str
    runtime: str
    input_source: str
    timing: Timing
    outputs: dict = field(default_factory=dict)
    metrics: list = field(default_factory=list)   # OutputMetrics when validated
    notes: list = field(default_factory=list)
    op_stats: list = field(default_factory=list)  # profiler.OpStat per op when profiled
    device: str = "host"                           # where it ran (mace/devices for the others)
    device_info: dict = field(default_factory=dict)  # a device's python, numpy, machine, abi
    fallback: str = ""                             # why a GPU runtime ran on the CPU ("" when it did not)

    @property
    def passed(self) -> bool:
        return all(m.passed for m in self.metrics)


def timed(fn):
    """(fn(), milliseconds it took)."""
    t = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - t) * 1000.0
