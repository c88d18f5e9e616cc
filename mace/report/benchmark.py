"""Model benchmark: MACE's `benchmark` statistics, measured through the observer API.

Sections (MACE's statistics tables): Warm Up, Run without statistics, Run with
statistics (whole runs), then per op from the runs with statistics: Sort by Run
Order, Sort by Computation Time (top 10), Stat by Op Type, Stat by MACs and the
Summary of Ops' Stat (per-round sums of op times). Times are milliseconds;
`std` is in milliseconds too (MACE prints microseconds under the same header).
"""
from __future__ import annotations

import gc
import statistics
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from mace.ir.opstats import graph_stats
from mace.proto import pb
from mace.runtime.dsp.backend import NodeCost
from mace.runtime.dsp.cost_model import CostModel
from mace.runtime.observer import Event, register, unregister
from mace.transform.placement.timing import (GroupTiming, TransferTiming, placement_timing,
                                             record as record_transfers, stop as stop_transfers)


@dataclass
class RoundStats:
    round: int
    first: float
    curr: float
    min: float
    max: float
    avg: float
    std: float

    @classmethod
    def of(cls, times: list) -> "RoundStats":
        if not times:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(len(times), times[0], times[-1], min(times), max(times), statistics.fmean(times),
                   statistics.pstdev(times))


@dataclass
class OpTiming:
    index: int
    type: str
    name: str
    start: float          # ms from the start of the run (mean over rounds)
    first: float          # ms in the first round
    avg: float            # mean ms
    percent: float        # of the sum of all ops' mean times
    cdf: float            # cumulative percent in run order (or in the sorted order of a table)
    gmacps: float
    stride: list
    pad: str
    filter_shape: list
    output_shape: list
    dilation: list
    macs: int
    kernel: str
    framework_ops: list


@dataclass
class TypeStat:
    type: str
    count: int
    avg: float
    percent: float
    cdf: float
    macs: int
    gmacps: float
    called_times: int     # calls per run, as MACE's example prints it


@dataclass
class MacStat:
    total: int
    round: int
    first: float          # G MAC/s of the first round
    avg: float
    std: float


@dataclass
class BenchmarkResult:
    model: str
    runtime: str
    warm_up: RoundStats
    run_without_statistics: RoundStats
    run_with_statistics: RoundStats
    run_order: list = field(default_factory=list)        # OpTiming in run order
    by_op_type: list = field(default_factory=list)       # TypeStat, slowest first
    macs: MacStat | None = None
    ops_summary: RoundStats | None = None
    round_op_ms: list = field(default_factory=list)      # per round, the sum of op times
    estimated: list = field(default_factory=list)        # runtime dsp: the backend's NodeCost per op
    groups: list = field(default_factory=list)           # GroupTiming: mixed placements (placement_timing)
    transfers: list = field(default_factory=list)        # TransferTiming between the groups

    def by_computation_time(self, top: int = 10) -> list:
        """The `top` slowest ops, their cdf% re-accumulated in that order."""
        ops = sorted(self.run_order, key=lambda o: -o.avg)[:top]
        acc, rows = 0.0, []
        for o in ops:
            acc += o.percent
            rows.append(OpTiming(**{**asdict(o), "cdf": acc}))
        return rows

    def to_dict(self) -> dict:
        d = asdict(self)
        d["by_computation_time"] = [asdict(o) for o in self.by_computation_time()]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "BenchmarkResult":
        """The inverse of to_dict (a device's runner sends its result as JSON); derived keys
        such as by_computation_time are recomputed, not read."""
        def stats(key):
            return RoundStats(**d[key]) if d.get(key) is not None else None

        return cls(d["model"], d["runtime"], stats("warm_up"), stats("run_without_statistics"),
                   stats("run_with_statistics"), [OpTiming(**o) for o in d.get("run_order", [])],
                   [TypeStat(**t) for t in d.get("by_op_type", [])],
                   MacStat(**d["macs"]) if d.get("macs") is not None else None, stats("ops_summary"),
                   list(d.get("round_op_ms", [])), [NodeCost(**c) for c in d.get("estimated", [])],
                   [GroupTiming(**g) for g in d.get("groups", [])],
                   [TransferTiming(**t) for t in d.get("transfers", [])])


_BEFORE = {Event.BEFORE, Event.BEFORE | Event.FIRST, Event.BEFORE | Event.LAST,
           Event.BEFORE | Event.FIRST | Event.LAST}
_FIRST = {f for f in _BEFORE if f & Event.FIRST}


class OpTimer:
    """Observer callback timing every node; `times[i]` and `starts[i]` hold ms per round."""

    def __init__(self):
        self.times = defaultdict(list)
        self.starts = defaultdict(list)
        self._begin = {}
        self._round_start = 0.0

    def __call__(self, flags: Event, node) -> None:
        now = time.perf_counter()
        if flags in _BEFORE:  # membership of a prepared set: cheaper than enum arithmetic
            if flags in _FIRST:
                self._round_start = now
            self._begin[node.index] = now
        else:
            begin = self._begin.pop(node.index)
            self.times[node.index].append((now - begin) * 1000.0)
            self.starts[node.index].append((begin - self._round_start) * 1000.0)

    def round_sums(self) -> list:
        per_node = list(self.times.values())
        rounds = min((len(t) for t in per_node), default=0)
        return [sum(t[r] for t in per_node) for r in range(rounds)]


def _timed_runs(engine, inputs, rounds: int, max_seconds: float | None = None) -> list:
    """Times of `rounds` runs; with `max_seconds` (MACE's benchmark flag) stop once the phase has
    run that long, after at least one run."""
    times, start = [], time.perf_counter()
    for _ in range(rounds):
        t = time.perf_counter()
        engine.run(inputs)
        times.append((time.perf_counter() - t) * 1000.0)
        if max_seconds is not None and time.perf_counter() - start >= max_seconds:
            break
    return times


def profile_runs(engine, inputs, rounds: int, max_seconds: float | None = None) -> tuple:
    """(OpTimer, whole-run times) of `rounds` runs with the timer registered."""
    timer = OpTimer()
    handle = register(engine, timer, Event.BEFORE | Event.AFTER)
    try:
        runs = _timed_runs(engine, inputs, rounds, max_seconds)
    finally:
        unregister(engine, handle)
    return timer, runs


def _gmacps(macs: int, ms: float) -> float:
    return macs / (ms * 1e-3) / 1e9 if ms > 0 else 0.0


def op_timings(static: list, timer: OpTimer, kernels: dict) -> list:
    means = {s.index: statistics.fmean(timer.times[s.index]) for s in static if timer.times[s.index]}
    total = sum(means.values()) or 1.0
    rows, acc = [], 0.0
    for s in static:
        if s.index not in means:
            continue
        avg = means[s.index]
        pct = 100.0 * avg / total
        acc += pct
        rows.append(OpTiming(s.index, s.type, s.name, statistics.fmean(timer.starts[s.index]),
                             timer.times[s.index][0], avg, pct, acc, _gmacps(s.macs, avg), s.strides,
                             s.pad, s.filter_shape, s.output_shapes[0] if s.output_shapes else [],
                             s.dilations, s.macs, kernels.get(s.index, ""), s.framework_ops))
    return rows


def type_stats(rows: list) -> list:
    groups = defaultdict(list)
    for r in rows:
        groups[r.type].append(r)
    total = sum(r.avg for r in rows) or 1.0
    stats = sorted(((t, sum(r.avg for r in g), g) for t, g in groups.items()), key=lambda x: -x[1])
    result, acc = [], 0.0
    for op_type, avg, group in stats:
        pct = 100.0 * avg / total
        acc += pct
        macs = sum(r.macs for r in group)
        result.append(TypeStat(op_type, len(group), avg, pct, acc, macs, _gmacps(macs, avg), len(group)))
    return result


def mac_stats(total_macs: int, round_ms: list) -> MacStat:
    rates = [_gmacps(total_macs, ms) for ms in round_ms]
    if not rates:
        return MacStat(total_macs, 0, 0.0, 0.0, 0.0)
    return MacStat(total_macs, len(rates), rates[0], statistics.fmean(rates), statistics.pstdev(rates))


def benchmark_engine(engine, inputs: dict, rounds: int = 10, warmup: int = 1, model: str = "",
                     runtime: str = "cpu", static: list | None = None,
                     max_seconds: float | None = None) -> BenchmarkResult:
    """Run the three timing phases and build every table from the runs with statistics;
    `max_seconds` cuts each timed phase short (at least one run each)."""
    rounds = max(int(rounds), 1)
    static = static if static is not None else graph_stats(engine.graph)
    collecting = gc.isenabled()
    gc.disable()  # a collection inside a timed op shows up as a slow op that is not
    try:
        warm = _timed_runs(engine, inputs, max(int(warmup), 1))
        plain = _timed_runs(engine, inputs, rounds, max_seconds)
        moves = record_transfers(engine)   # GPU uploads/downloads timed apart (mixed placements)
        timer, with_stats = profile_runs(engine, inputs, rounds, max_seconds)
    finally:
        stop_transfers(engine)
        if collecting:
            gc.enable()
    kernels = {n.index: n.kernel_name for n in engine.nodes}
    rows = op_timings(static, timer, kernels)
    sums = timer.round_sums()
    return BenchmarkResult(model, runtime, RoundStats.of(warm), RoundStats.of(plain),
                           RoundStats.of(with_stats), rows, type_stats(rows),
                           mac_stats(sum(s.macs for s in static), sums), RoundStats.of(sums), sums,
                           _estimated(engine),
                           *placement_timing(engine.graph, {r.index: r.avg for r in rows}, moves))


def _estimated(engine) -> list:
    """Per-op cycles a DSP backend reports (mace/runtime/dsp: the simulator's cost model)."""
    costs = getattr(engine, "node_costs", None)
    if costs:
        return list(costs())
    # a model with dsp layer groups runs on the host engine: estimate its dsp-placed ops
    model = CostModel()
    return [model.estimate(i, op, engine.graph) for i, op in enumerate(engine.graph.net.op)
            if op.device_type == pb.HEXAGON]
