"""Automatic mixed precision: measure what int8 costs each layer, so the quantize pass can keep
the fewest layers float until an accuracy target is met (`quantize_target_cosine`).

    reference = tensor_values(float_graph, samples)          # every float tensor, per sample
    measured = tensor_values(quantized_graph, samples, dequantize=True)
    output_cosine(reference, measured, outputs)              # the worst output's cosine
    layer_damage(float_graph, domain, reference, measured)   # op -> (SQNR drop dB, SQNR dB)

A layer's damage is the trace's SQNR drop (mace/validate/trace.py): the worst SQNR of its
inputs minus its own output's, over all samples together: how much accuracy the layer lost
by itself, whatever came before it. A 1x1 conv computing a small difference of large terms
loses tens of dB with nothing clipped; a well-scaled conv loses a fraction of one.
"""
from __future__ import annotations

import math

import numpy as np

from mace.ir.quant_params import dequantize
from mace.runtime.engine import Engine

EXACT_DB = 100.0   # what an unquantized input counts as (float32 rounding is ~140 dB)


def tensor_values(graph, samples, dequantize_outputs: bool = False) -> list:
    """[{tensor: float32 array}] per sample: inputs and every op output (uint8 ones dequantized).
    float32, not 64: every tensor of every sample is held (a 256x256 segmentation net: GBs);
    the sums are taken in float64 (_joined)."""
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


def _joined(values: list, name: str):
    parts = [v[name].reshape(-1) for v in values if name in v]
    return np.concatenate(parts).astype(np.float64) if len(parts) == len(values) and parts else None


def _cosine(a, b) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


def _sqnr_db(ref, out) -> float:
    noise, signal = float(np.sum((ref - out) ** 2)), float(np.sum(ref ** 2))
    if noise == 0:
        return math.inf
    return 10.0 * math.log10(signal / noise) if signal > 0 else -math.inf


def output_cosine(reference: list, measured: list, outputs) -> float:
    """The lowest cosine over the model's outputs, each over all samples together."""
    return min(_cosine(_joined(reference, o), _joined(measured, o)) for o in outputs)


def layer_damage(graph, domain: dict, reference: list, measured: list) -> dict:
    """op name -> (SQNR drop dB, output SQNR dB) for the ops of float `graph` whose outputs
    the quantized model computes in uint8 (`domain`: float tensor -> its uint8 twin)."""
    sqnr = {}

    def tensor_sqnr(t):
        if t not in sqnr:
            q = domain.get(t)
            ref, out = _joined(reference, t), _joined(measured, q) if q else None
            sqnr[t] = _sqnr_db(ref, out) if ref is not None and out is not None else None
        return sqnr[t]

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
