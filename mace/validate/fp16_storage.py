"""What fp16 storage does to a GPU model, measured on the CPU in float: the `gpu_fp32_ops: auto` check.

The GPU runtime computes in float and stores every op's output in half images (data_type
fp16_fp32). Half clamps at +-65504 (the store does) and holds values below 2^-14 as subnormals
with fewer significant bits, below 2^-25 as zero. Convert runs the converted graph on the CPU in
float over the sample inputs (calibration samples, else validation inputs, else `run`'s random
ones) and, per node placed on the GPU, counts what half would clamp or flush and how much the
rounding alone costs (SQNR). It then emulates fp16 storage on the CPU (each GPU node's outputs
rounded to half, clamped, in place, as the next node reads them) and keeps nodes in float: every
saturating node, then the fewest of the others, worst rounding SQNR first, with which the
emulated outputs reach `target` cosine against the float run (bisection: a few whole runs). The kept nodes get the op argument `gpu_fp32` (with
`gpu_fp32_reason`), and the GPU runtime gives them float images (docs/gpu.md).

Values also enter half images from the host: a CPU op's output (a Reduce the GPU has no kernel
for) or a model input, uploaded for GPU readers. Each such producer is a candidate as a GPU node
is: its handed-over tensors are counted and emulated (rounded in place, so the emulation is
pessimistic for its CPU readers, which really read the float), and keeping it in float marks
every GPU op that reads those tensors (one image serves all of them).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mace.errors import ConfigError
from mace.ir.args import set_arg
from mace.ops.gpu.support import GPU
from mace.runtime.engine import Engine
from mace.runtime.gpu.range_counts import HALF_MAX, half_counts
from mace.runtime.gpu.runtime import CHECKED_ARG, FP32_ARG, FP32_REASON_ARG
from mace.runtime.observer import Event, register, unregister
from mace.validate.metrics import cosine, sqnr_db

MAX_SAMPLES = 4                                   # sample inputs the check runs


@dataclass
class NodeRange:
    """What half storage would do to one GPU node's outputs over the samples."""

    index: int
    name: str
    type: str
    values: int = 0
    nonfinite: int = 0
    clamped: int = 0
    subnormal: int = 0
    flushed: int = 0
    sqnr_db: float = float("inf")     # float outputs vs their half-stored copy (the worst sample)
    handed: tuple = ()                # a CPU op or model input: the tensors it hands to half images
    readers: tuple = ()               # ... and the GPU ops that read them

    @property
    def node_names(self) -> set:
        """The GPU ops this candidate puts in float: itself, or the readers of what it hands over."""
        return set(self.readers) if self.handed else {self.name}

    @property
    def saturated(self) -> bool:
        return bool(self.nonfinite or self.clamped)

    def reason(self) -> str:
        if self.handed:
            return f"reads {self.handed[0]!r} made on the CPU by {self.name!r} ({self.type}), which " + \
                self._what()
        return self._what()

    def _what(self) -> str:
        if self.saturated:
            what = f"{self.clamped} of {self.values} values (all samples) beyond +-65504" if self.clamped else \
                f"{self.nonfinite} NaN/Inf"
            return f"saturates in fp16: {what}"
        share = 100.0 * (self.subnormal + self.flushed) / max(self.values, 1)
        return (f"underflows in fp16: {share:.0f}% of values below 2^-14 ({self.flushed} flushed to 0), "
                f"rounding SQNR {self.sqnr_db:.1f} dB")


@dataclass
class Fp16Check:
    """The result: per-node ranges, the nodes kept in float and the emulated cosines."""

    nodes: list = field(default_factory=list)         # NodeRange of every GPU node
    fp32: list = field(default_factory=list)          # NodeRange kept in float, in choice order
    cosine_fp16: float = 1.0                          # emulated, every GPU node in half
    cosine_fallback: float = 1.0                      # emulated, with the fallback
    target: float = 0.999
    samples: int = 0

    @property
    def reached(self) -> bool:
        return self.cosine_fallback >= self.target


def half_round(x: np.ndarray) -> np.ndarray:
    """x as fp16 storage returns it: clamped to +-65504, rounded to half (NaN stays NaN)."""
    return np.clip(x, -HALF_MAX, HALF_MAX).astype(np.float16).astype(np.float32)


def _count(r: NodeRange, x: np.ndarray) -> None:
    nonfinite, clamped, subnormal, flushed = half_counts(x)
    r.values += x.size
    r.nonfinite += nonfinite
    r.clamped += clamped
    r.subnormal += subnormal
    r.flushed += flushed
    if not nonfinite and x.size:
        r.sqnr_db = min(r.sqnr_db, sqnr_db(x.astype(np.float64), half_round(x).astype(np.float64)))


def _float_outputs(t) -> bool:
    return np.dtype(t.dtype) == np.float32


def handed_over(graph, gpu_ops: set) -> dict:
    """CPU ops and model inputs whose float tensors GPU ops read: name -> (index, type, tensors,
    readers); a model input's index is -1."""
    made_by = {t: (i, op) for i, op in enumerate(graph.net.op) for t in op.output}
    out = {}
    for op in graph.net.op:
        if op.name not in gpu_ops:
            continue
        for t in op.input:
            if t in graph.consts or (t in made_by and made_by[t][1].name in gpu_ops) \
                    or np.dtype(graph.specs[t][1]) != np.float32:
                continue
            index, producer = made_by.get(t, (-1, None))
            key = producer.name if producer is not None else t
            entry = out.setdefault(key, (index, producer.type if producer is not None else "input", [], []))
            if t not in entry[2]:
                entry[2].append(t)
            if op.name not in entry[3]:
                entry[3].append(op.name)
    return out


def measure(engine: Engine, gpu_ops: set, samples: list, handed: dict | None = None) -> tuple:
    """(NodeRange per GPU node and per `handed` producer, float outputs per sample) from float runs."""
    handed = handed or {}
    ranges, refs = {}, []
    for name, (index, kind, tensors, readers) in handed.items():
        ranges[name] = NodeRange(index, name, kind, handed=tuple(tensors), readers=tuple(readers))

    def after(flags, node):
        if node.name in gpu_ops:
            r = ranges.setdefault(node.name, NodeRange(node.index, node.name, node.type))
            for t in node.outputs:
                if _float_outputs(t):
                    _count(r, np.asarray(t.data, dtype=np.float32))
        elif node.name in handed:
            for t in node.outputs:
                if t.name in ranges[node.name].handed:
                    _count(ranges[node.name], np.asarray(t.data, dtype=np.float32))

    handle = register(engine, after, Event.AFTER)
    try:
        for feed in samples:
            for name in set(feed) & set(handed):
                _count(ranges[name], np.asarray(feed[name], dtype=np.float32))
            refs.append({k: np.array(v, dtype=np.float64) for k, v in engine.run(feed).items()})
    finally:
        unregister(engine, handle)
    return sorted(ranges.values(), key=lambda r: (r.index, r.name)), refs


def emulated_cosine(engine: Engine, half_ops: set, samples: list, refs: list, handed: dict | None = None) -> float:
    """The lowest output cosine over the samples with `half_ops`' outputs stored as half (for a
    `handed` producer among them: the tensors it hands to GPU ops)."""
    handed = handed or {}

    def after(flags, node):
        if node.name in half_ops:
            for t in node.outputs:
                if _float_outputs(t) and (node.name not in handed or t.name in handed[node.name][2]):
                    data = t.data
                    data[...] = half_round(data)   # in place: the next node reads the half value

    handle = register(engine, after, Event.AFTER)
    worst = 1.0
    try:
        # a value flushed to 0 may meet a log or a division: -inf and NaN are results here
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for feed, ref in zip(samples, refs):
                feed = {k: half_round(np.asarray(v, np.float32)) if k in half_ops and k in handed else v
                        for k, v in feed.items()}
                out = engine.run(feed)
                for name, want in ref.items():
                    c = cosine(want, np.asarray(out[name], dtype=np.float64))
                    worst = min(worst, c if np.isfinite(c) else -1.0)   # NaN must not pass
    finally:
        unregister(engine, handle)
    return worst


def _candidates(nodes: list) -> list:
    """Nodes float storage could help, worst first: saturating ones, then by rounding SQNR
    (a node with only half's ordinary rounding noise, > 60 dB, is no candidate)."""
    bad = [r for r in nodes if r.saturated or r.subnormal or r.flushed or r.sqnr_db <= 60.0]
    return sorted(bad, key=lambda r: (not r.saturated, r.sqnr_db, r.index))


def check_fp16(graph, gpu_ops: set, samples: list, target: float = 0.999, progress=None) -> Fp16Check:
    """Pick the GPU nodes to keep in float so emulated fp16 storage reaches `target` cosine.

    Saturating nodes are always kept; of the rest, the shortest worst-first prefix that reaches
    the target, found by bisection (a few whole runs, not one per node)."""
    samples = samples[:MAX_SAMPLES]
    say = progress or (lambda text: None)
    engine = Engine(graph, device="cpu")
    say(f"gpu_fp32_ops auto: float runs over {len(samples)} sample(s)")
    handed = handed_over(graph, gpu_ops)
    nodes, refs = measure(engine, gpu_ops, samples, handed)
    runs = [0]
    result = Fp16Check(nodes=nodes, target=target, samples=len(samples))
    every = {r.name for r in nodes}
    order = _candidates(nodes)
    must = sum(r.saturated for r in order)

    def cos(k: int) -> float:
        runs[0] += 1
        say(f"gpu_fp32_ops auto: emulated fp16 run {runs[0]} (of about {2 + max(len(order), 1).bit_length()}), "
            f"{k} of {len(order)} candidate op(s) in float")
        kept = {r.name for r in order[:k]}.union(*(r.node_names for r in order[:k]))
        return emulated_cosine(engine, every - kept, samples, refs, handed)

    result.cosine_fp16 = cos(0)
    low, high, best = must, len(order), None
    if result.cosine_fp16 < target or must:
        best = cos(high)
        if best >= target:   # bisect for the shortest prefix that still reaches the target
            while low < high:
                mid = (low + high) // 2
                c = cos(mid)
                if c >= target:
                    high, best = mid, c
                else:
                    low = mid + 1
        keep = high
    else:
        keep = 0
    result.fp32 = order[:keep]
    result.cosine_fallback = result.cosine_fp16 if best is None else best
    return result


def _gpu_ops(graph) -> set:
    return {op.name for op in graph.net.op if op.device_type == GPU}


SHOWN = 5   # kept ops listed one per line in the notes; the log (convert --vlog_level 1) has all


def mark_fp32_ops(graph, asked, samples, where: str, threshold: float = 0.995, log=None,
                  progress=None) -> list:
    """Apply a subgraph's `gpu_fp32_ops` to a converted, placed graph; returns notes for the user
    (every kept op and its reason also goes to `log`).

    `asked`: op names, or "auto" (check_fp16 over `samples()`, aiming above `threshold`, the GPU
    validation threshold, with a margin for what the emulation leaves out: weights in half). After
    auto, the net argument `gpu_fp16_checked` says the ops left in half were measured, so `run`
    names only what saturates there, not each harmless underflow."""
    gpu_ops = _gpu_ops(graph)
    ops = {op.name: op for op in graph.net.op}
    if asked == "auto":
        feeds = samples()
        target = 1.0 - (1.0 - threshold) / 5.0
        result = check_fp16(graph, gpu_ops, feeds, target, progress)
        chosen = {}
        for r in result.fp32:   # a GPU op kept for itself and as a reader: its first reason
            for name in sorted(r.node_names):
                chosen.setdefault(name, r.reason())
        chosen = list(chosen.items())
        set_arg(graph.net, CHECKED_ARG, float(result.cosine_fallback))
        head = (f"gpu_fp32_ops auto: fp16 storage emulated on {result.samples} sample(s): output cosine "
                f"{result.cosine_fp16:.5f}")
        if not chosen:
            return [head + ", no op needs float storage"]
        saturating = len(set().union(*(r.node_names for r in result.fp32 if r.saturated)))
        notes = [head + f" -> {result.cosine_fallback:.5f} with {len(chosen)} of {len(gpu_ops)} GPU op(s) "
                 f"kept in float ({saturating} saturate or read what saturates, {len(chosen) - saturating} "
                 f"underflow)"
                 + ("" if result.reached else f" (target {target:.4f} not reached)")]
    else:
        handed = handed_over(graph, gpu_ops)
        unknown = [n for n in asked if n not in ops and n not in handed]
        if unknown:
            raise ConfigError(f"{where}.gpu_fp32_ops: no op named {unknown[0]!r} in the converted model "
                              f"(names as `run` and `debug` print them)")
        chosen = [(n, "named in gpu_fp32_ops") for n in asked if n in gpu_ops]
        for n in (n for n in asked if n in handed):   # a CPU op or input: the GPU ops reading it
            chosen += [(r, f"reads {handed[n][2][0]!r} from {n!r} (named in gpu_fp32_ops)")
                       for r in handed[n][3] if r not in dict(chosen)]
        notes = [f"gpu_fp32_ops: {n} runs on the CPU, in float already" for n in asked
                 if n in ops and n not in gpu_ops and n not in handed]
    for i, (name, reason) in enumerate(chosen):
        set_arg(ops[name], FP32_ARG, 1)
        set_arg(ops[name], FP32_REASON_ARG, reason)
        line = f"GPU op {name} ({ops[name].type}) keeps float storage: {reason}"
        if log:
            log(line)
        if i < SHOWN:
            notes.append(line)
    if len(chosen) > SHOWN:
        notes.append(f"... and {len(chosen) - SHOWN} more op(s) kept in float (convert --vlog_level 1 "
                     f"lists each with its reason; `gpu_fp32: 1` in the .pb_txt)")
    return notes
