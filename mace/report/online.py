"""Online report (`run --report`): what a run cost, Plumerai's "Execution report".

Total runtime (mean over the profiled rounds), the engine's memory (arena of
activation tensors, persistent data: weights and the kernels' own buffers;
a device runtime adds what `engine.device_memory()` reports, e.g. OpenCL
images and buffers), the process's peak resident memory, and per layer the
offline columns plus the latency and its share of the total.
"""
from __future__ import annotations

import resource
import statistics
import sys
import time
from dataclasses import dataclass, field

from mace.ir.opstats import graph_stats
from mace.report.benchmark import profile_runs
from mace.report.offline import LAYER_HEADERS, layer_rows, totals_lines, used_consts
from mace.runtime.gpu.deploy import range_check_notes
from mace.runtime.observer import kernel_buffers
from mace.util.text import banner, spaced, table


@dataclass
class OnlineReport:
    model: str
    runtime: str
    rounds: int
    total_ms: float                     # mean whole-run time (no observer attached)
    profiled_ms: float                  # mean whole-run time with the per-layer timer attached
    arena_bytes: int                    # activation tensors (the planned arena)
    weight_bytes: int                   # persistent: model weights (memory-mapped .data)
    params: int                         # elements of those weights
    kernel_bytes: int                   # persistent: packed weights and scratch of the kernels
    peak_rss_bytes: int                 # the process's peak resident set so far
    layers: list = field(default_factory=list)        # OpStatic
    latency_ms: dict = field(default_factory=dict)    # op index -> mean ms
    device_bytes: dict = field(default_factory=dict)  # e.g. {"opencl_image": n} on a device runtime
    range_notes: list = field(default_factory=list)   # GPU fp16 storage: the first op it cannot hold

    @property
    def layers_ms(self) -> float:
        return sum(self.latency_ms.values())

    def percent(self, index: int) -> float:
        return 100.0 * self.latency_ms.get(index, 0.0) / (self.layers_ms or 1.0)


def peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB


def _timed(engine, inputs) -> float:
    t = time.perf_counter()
    engine.run(inputs)
    return (time.perf_counter() - t) * 1000.0


def online_report(engine, inputs: dict, rounds: int = 10, model: str = "", runtime: str = "cpu") -> OnlineReport:
    engine.run(inputs)  # warm-up, not reported
    rounds = max(int(rounds), 1)
    plain = [_timed(engine, inputs) for _ in range(rounds)]
    timer, runs = profile_runs(engine, inputs, rounds)
    weights = used_consts(engine.graph)
    return OnlineReport(
        model=model or engine.graph.net.name, runtime=runtime, rounds=len(runs),
        total_ms=statistics.fmean(plain), profiled_ms=statistics.fmean(runs),
        arena_bytes=int(engine.plan.arena_size),
        weight_bytes=sum(int(engine.graph.consts[t].nbytes) for t in weights),
        params=sum(int(engine.graph.consts[t].size) for t in weights),
        kernel_bytes=sum(t.nbytes for n in engine.nodes
                         for t in kernel_buffers(n, getattr(engine, "scratch", None)))
        + int(getattr(engine, "scratch_bytes", 0)),
        peak_rss_bytes=peak_rss_bytes(),
        layers=graph_stats(engine.graph),
        latency_ms={i: statistics.fmean(t) for i, t in timer.times.items() if t},
        device_bytes=device_memory(engine),
        range_notes=range_check_notes(engine))


def device_memory(engine) -> dict:
    """Device memory of a GPU engine: its activation images and host<->image staging buffers.

    Estimated from the runtime's image plan (4 channels of half or float per pixel) and
    transfers; an engine that knows better may say so itself with `device_memory()`."""
    own = getattr(engine, "device_memory", None)
    if own:
        return dict(own())
    gpu = getattr(engine, "gpu", None)
    if gpu is None:
        return {}
    try:
        staging = sum(int(t.buffer.size) for n in engine.nodes
                      for _, t in getattr(n.kernel, "uploads", []) + getattr(n.kernel, "downloads", []))
        return {"OpenCL activation images": int(gpu.image_bytes),   # half, and float for gpu_fp32_ops
                "OpenCL staging buffers": staging}
    except AttributeError:  # a GPU runtime laid out differently: say nothing rather than guess
        return {}


def render_text(report: OnlineReport) -> str:
    metrics = [("Total runtime", f"{report.total_ms:.3f} ms"),
               ("Tensor arena (RAM): activation tensors", f"{spaced(report.arena_bytes)} bytes"),
               ("Persistent data", f"{spaced(report.weight_bytes + report.kernel_bytes)} bytes"),
               ("-- Model weights (memory-mapped)", f"{spaced(report.weight_bytes)} bytes"),
               ("-- Kernel buffers (packed weights, scratch)", f"{spaced(report.kernel_bytes)} bytes"),
               *((f"-- Device: {k}", f"{spaced(v)} bytes") for k, v in report.device_bytes.items()),
               ("Peak process memory (RSS)", f"{spaced(report.peak_rss_bytes)} bytes")]
    rows = layer_rows(report.layers, lambda s: [
        f"{report.latency_ms.get(s.index, 0.0):.4f} ({report.percent(s.index):5.2f}%)"])
    lines = banner("Execution report") + [
        "",
        f"Model '{report.model}' on {report.runtime}, mean of {report.rounds} run(s)",
        "",
        *table(["Metric", "Value"], metrics, right={1}),
        "",
        "Breakdown per layer:",
        "",
        *table(LAYER_HEADERS + ["Latency (ms)", "IR op <- framework ops"], rows, right={0, 2, 3, 4, 5, 6}),
        "",
        *totals_lines(sum(s.ops for s in report.layers), report.params, report.weight_bytes),
        f"Sum of layer latencies: {report.layers_ms:.3f} ms per run; a run takes {report.total_ms:.3f} ms, "
        f"{report.profiled_ms:.3f} ms with the per-layer timer attached",
        *(["", "fp16 storage range check:", *report.range_notes] if report.range_notes else []),
    ]
    return "\n".join(lines) + "\n"
