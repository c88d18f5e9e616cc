"""Automatic mixed precision: measure what int8 costs each layer, so the quantize pass can keep
the fewest layers float until an accuracy target is met (`quantize_target_cosine`).

    reference = tensor_values(float_graph, samples)          # every float tensor, per sample
    stats = measure(quantized_graph, samples, reference, wanted)   # running sums per tensor
    damage_from_stats(float_graph, domain, stats)            # op -> (SQNR drop dB, SQNR dB)

A layer's damage is the trace's SQNR drop (mace/validate/trace.py): the worst SQNR of its
inputs minus its own output's, over all samples together: how much accuracy the layer lost
by itself, whatever came before it. A 1x1 conv computing a small difference of large terms
loses tens of dB with nothing clipped; a well-scaled conv loses a fraction of one.

The search (search_float_layers, driven by the quantize pass):

    1. the float reference over the calibration samples, once (every tensor, float32);
    2. the model int8 (the plan as given): the outputs' cosine and every layer's damage;
    3. while the cosine misses the target, keep float the worst layers as measured now (and
       the ops feeding them), one at first, then half as many again as are kept (1, 1, 1, 2,
       3, 4, 6, 9, ...), and measure again: a layer's damage shows once the noise before it
       is gone, so the ranking is taken again each step, not once;
    4. the last step kept several: a bisection over how many of them are needed, measuring
       the outputs only.

Each step quantizes the model and runs it over the samples, comparing each tensor with the
float reference as it is computed (sums, nothing held): a few seconds where holding and
joining every tensor took tens. A model needing k layers float costs about 2.5 log2(k) + 3
quantized runs, not k. The search is bounded by MAX_EVALUATIONS quantized runs and MAX_SECONDS of wall time (environment:
MACE_MIXED_PRECISION_MAX_EVALUATIONS, MACE_MIXED_PRECISION_MAX_SECONDS); at the bound it keeps
the fewest-float configuration measured that met the target, or else the best one measured,
and the report says the bound stopped it.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from mace.ir.quant_params import dequantize
from mace.quantize.report import MixedPrecision
from mace.runtime.engine import Engine

EXACT_DB = 100.0   # what an unquantized input counts as (float32 rounding is ~140 dB)


def tensor_values(graph, samples, dequantize_outputs: bool = False) -> list:
    """[{tensor: float32 array}] per sample: inputs and every op output (uint8 ones dequantized).
    float32, not 64: every tensor of every sample is held (a 256x256 segmentation net: GBs);
    measure compares against them tensor by tensor."""
    engine = Engine(graph, device="cpu")
    params = {t: graph.quant_params(t) for op in graph.net.op for t in op.output} \
        if dequantize_outputs else {}
    per_sample = []
    for inputs in samples:
        values = {n: np.asarray(v, np.float32) for n, v in inputs.items()}

        def observe(event, node, _engine, values=values):
            if event != "after":
                return
            for name, out in zip(node.op.output, node.outputs):
                p = params.get(name)
                values[name] = dequantize(np.array(out), p).astype(np.float32) if p is not None \
                    else np.array(out, np.float32)

        engine.observers.append(observe)
        try:
            engine.run(inputs)
        finally:
            engine.observers.pop()
        per_sample.append(values)
    return per_sample


# ---- the search ----------------------------------------------------------------------------

MAX_EVALUATIONS = 24      # quantized runs over the samples, the all-int8 one included
MAX_SECONDS = 900.0       # wall time of the search, the float reference included
EVALUATIONS_ENV = "MACE_MIXED_PRECISION_MAX_EVALUATIONS"
SECONDS_ENV = "MACE_MIXED_PRECISION_MAX_SECONDS"
STEP = "mixed precision: step"   # how each step's progress line starts (convert prints them)


def search_bounds(options: dict | None = None) -> tuple:
    """(max quantized evaluations, max seconds): options' mixed_max_evaluations /
    mixed_max_seconds, else the environment's, else MAX_EVALUATIONS / MAX_SECONDS."""
    options = options or {}
    evals = options.get("mixed_max_evaluations") or os.environ.get(EVALUATIONS_ENV) or MAX_EVALUATIONS
    seconds = options.get("mixed_max_seconds") or os.environ.get(SECONDS_ENV) or MAX_SECONDS
    return max(1, int(evals)), float(seconds)


class _Stats:
    """Sums over all samples of one tensor against its float reference: the cosine and SQNR
    of the samples joined, without joining them."""
    __slots__ = ("dot", "ref", "out", "noise", "count")

    def __init__(self):
        self.dot = self.ref = self.out = self.noise = 0.0
        self.count = 0

    def add(self, ref: np.ndarray, out: np.ndarray) -> None:
        r, o = ref.reshape(-1), out.reshape(-1)
        if r.size != o.size:
            return
        d = r - o
        self.dot += float(np.dot(r, o))
        self.ref += float(np.dot(r, r))
        self.out += float(np.dot(o, o))
        self.noise += float(np.dot(d, d))
        self.count += 1

    def cosine(self) -> float:
        if self.ref == 0 or self.out == 0:
            return 1.0 if self.ref == self.out else 0.0
        return self.dot / math.sqrt(self.ref * self.out)

    def sqnr_db(self) -> float:
        if self.noise == 0:
            return math.inf
        return 10.0 * math.log10(self.ref / self.noise) if self.ref > 0 else -math.inf


def measure(graph, samples, reference: list, wanted: dict) -> dict:
    """Run quantized `graph` over `samples` and compare, sample by sample, the tensors of
    `wanted` (its tensor -> the float tensors of `reference` it stands for; uint8 ones
    dequantized) with the float reference: {(its tensor, float tensor): _Stats}. Nothing is
    held beyond one sample's op output at a time."""
    engine = Engine(graph, device="cpu")
    params = {t: graph.quant_params(t) for t in wanted}
    stats = {(q, f): _Stats() for q, fs in wanted.items() for f in fs}
    for ref, inputs in zip(reference, samples):
        def observe(event, node, _engine, ref=ref):
            if event != "after":
                return
            for name, out in zip(node.op.output, node.outputs):
                targets = wanted.get(name)
                if not targets:
                    continue
                p = params.get(name)
                value = dequantize(np.array(out), p).astype(np.float32) if p is not None \
                    else np.asarray(out, np.float32)
                for f in targets:
                    if f in ref:
                        stats[name, f].add(ref[f], value)

        for name, value in inputs.items():   # quantized model inputs are fed as floats
            for f in wanted.get(name, ()):
                if f in ref:
                    stats[name, f].add(ref[f], np.asarray(value, np.float32))
        engine.observers.append(observe)
        try:
            engine.run(inputs)
        finally:
            engine.observers.pop()
    return stats


def damage_from_stats(graph, domain: dict, stats: dict) -> dict:
    """op -> (SQNR drop dB, output SQNR dB) from measure's sums."""
    def tensor_sqnr(t):
        s = stats.get((domain[t], t)) if t in domain else None
        return s.sqnr_db() if s is not None and s.count == len_samples else None

    len_samples = max((s.count for s in stats.values()), default=0)

    damage = {}
    for op in graph.net.op:
        own = [s for s in map(tensor_sqnr, op.output) if s is not None]
        before = [s for s in (tensor_sqnr(t) for t in op.input if t not in graph.consts) if s is not None]
        if not own:
            continue
        worst_in = min([min(s, EXACT_DB) for s in before], default=EXACT_DB)
        own_db = max(min(min(own), EXACT_DB), -EXACT_DB)
        damage[op.name] = (worst_in - own_db, own_db)
    return damage


def keep_float(graph, plan: dict, names: list, why) -> list:
    """`plan` with the ops `names` kept float (reason `why(name)`) and the ops feeding them:
    what such an op loses is mostly its inputs' 8-bit rounding, which a uint8 tensor between a
    quantized producer and the float op would keep. Returns the ops newly kept float."""
    producers = graph.producers()
    ops = {op.name: op for op in graph.net.op}
    added = []
    for name in names:
        if plan.get(name) is None:
            plan[name] = why(name)
            added.append(name)
        for t in ops[name].input:
            src = producers.get(t)
            if src is not None and plan.get(src.name) is None:
                plan[src.name] = (f"kept float for quantize_target_cosine: feeds {name}, whose "
                                  f"inputs need more than 8 bits")
                added.append(src.name)
    return added


def search_float_layers(graph, plan: dict, samples: list, target: float, quantize, progress=None,
                        bounds: tuple | None = None) -> MixedPrecision:
    """Keep float the fewest of the quantizable layers of `graph`, worst SQNR drop first, so
    that the outputs' cosine over `samples` reaches `target` (module docstring); updates
    `plan` (op -> None when quantized, else why not). `quantize(plan)` -> (quantized copy of
    the graph, its domain: float tensor -> uint8 twin). `progress(text)`: one line per step."""
    progress = progress or (lambda text: None)
    max_evals, max_seconds = bounds or search_bounds()
    start = time.monotonic()
    outputs = list(graph.output_names)
    progress(f"mixed precision: float reference over {len(samples)} calibration sample(s)")
    reference = tensor_values(graph, samples)
    result = MixedPrecision(target, len(samples))
    result.bounds = [max_evals, max_seconds]

    def evaluate(trial_plan, layers: int, all_tensors: bool = False):
        t0 = time.monotonic()
        trial, domain = quantize(trial_plan)
        wanted = {o: [o] for o in outputs}
        for f, q in domain.items() if all_tensors else ():
            if f not in wanted.setdefault(q, []):
                wanted[q].append(f)
        stats = measure(trial, samples, reference, wanted)
        cos = min(stats[o, o].cosine() for o in outputs)
        floats = sum(1 for why in trial_plan.values() if why)
        result.trials.append([layers, floats, cos, round(time.monotonic() - t0, 2)])
        progress(f"{STEP} {len(result.trials)}/{max_evals}: {layers} layer(s) kept float "
                 f"({floats} float op(s) in all), cosine {cos:.4f} (target {target:g}), "
                 f"{time.monotonic() - start:.0f}s")
        return cos, stats, domain

    base = dict(plan)
    order, drops, chosen_at = [], {}, {}   # layers kept float in the order chosen, their drop, cosine

    def plan_for(k):
        trial = dict(base)
        keep_float(graph, trial, order[:k],
                   lambda name: (f"kept float for quantize_target_cosine {target:g}: it loses "
                                 f"{drops[name]:.1f} dB SQNR in int8 (outputs' cosine "
                                 f"{chosen_at[name]:.4f} with it quantized)"))
        return trial

    def bounded() -> str:
        if len(result.trials) >= max_evals:
            return f"the bound of {max_evals} quantized runs ({EVALUATIONS_ENV})"
        if time.monotonic() - start >= max_seconds:
            return f"the bound of {max_seconds:g} s ({SECONDS_ENV})"
        return ""

    cos, stats, domain = evaluate(base, 0, all_tensors=True)
    measured, batches = {0: cos}, []
    result.steps.append(cos)
    while cos < target and not bounded():   # grow: the worst layers as measured now
        trial = plan_for(len(order))
        damage = damage_from_stats(graph, domain, stats)
        ranked = sorted(((d[0], name) for name, d in damage.items() if trial.get(name) is None),
                        key=lambda x: (-x[0], x[1]))
        if not ranked:
            break
        batch = ranked[:max(1, len(order) // 2)]
        for drop, name in batch:
            order.append(name)
            drops[name], chosen_at[name] = drop, cos
        batches.append(len(batch))
        cos, stats, domain = evaluate(plan_for(len(order)), len(order), all_tensors=True)
        measured[len(order)] = cos
    del stats
    hi = len(order) if cos >= target else None
    lo = hi - batches[-1] if hi is not None and batches else 0
    while hi is not None and hi - lo > 1 and not bounded():   # trim the last batch: bisection
        k = (lo + hi) // 2
        measured[k] = evaluate(plan_for(k), k)[0]
        if measured[k] >= target:
            hi = k
        else:
            lo = k
    result.stopped = bounded() if hi is None or hi - lo > 1 else ""
    best = hi if hi is not None else max(measured, key=lambda n: (measured[n], -n))
    final = plan_for(best)
    plan.clear()
    plan.update(final)
    result.float_ops = [(name, drops[name], chosen_at[name]) for name in order[:best]]
    result.added, left = [], best
    for n in batches:
        if left > 0:
            result.added.append(min(n, left))
            left -= n
    if best:
        result.steps.append(measured[best])
    result.reached = measured[best] >= target
    result.seconds = round(time.monotonic() - start, 2)
    progress(f"mixed precision: {best} layer(s) kept float, cosine {measured[best]:.4f}, "
             f"{len(result.trials)} quantized run(s) in {result.seconds:.0f}s")
    return result
