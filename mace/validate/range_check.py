"""`run --gpu_out_of_range_check`: every node output checked for values the run cannot trust.

MACE's flag made its OpenCL kernels check their reads. Here the same question is asked of the
values: a NaN or Inf anywhere, and with fp16 storage (data_type fp16_*: GPU images in half)
any magnitude beyond half's largest finite value, which the image store clamps, or a node whose
values mostly fall below half's normal range (underflow). It runs once more: ops on the GPU are
judged by the counts their stores made before converting to half (the values read back are
already clamped: mace/runtime/gpu/range_counts.py), other ops by their float outputs, read
with an observer (mace/runtime/observer.py). On a GPU engine that counts, a CPU op's output is
float unless it is copied into a half image, and those copies are counted too: there the
observer looks for NaN and Inf only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mace.runtime.gpu.range_counts import flagged, problem, range_notes
from mace.runtime.observer import Event, register, unregister

HALF_MAX = float(np.finfo(np.float16).max)   # 65504


@dataclass
class RangeFinding:
    index: int
    op: str
    type: str
    tensor: str
    problem: str              # "NaN", "Inf" or "beyond fp16 (max |x| 7.1e+04)"


@dataclass
class RangeCheck:
    model: str
    data_type: str
    half_storage: bool
    checked: int = 0          # float tensors looked at
    findings: list = field(default_factory=list)
    hint: str = ""            # how to keep the ops found on the GPU in float


def _problem(value: np.ndarray, half: bool) -> str | None:
    if np.isnan(value).any():
        return "NaN"
    if np.isinf(value).any():
        return "Inf"
    if half and value.size:
        peak = float(np.abs(value).max())
        if peak > HALF_MAX:
            return f"beyond fp16 (max |x| {peak:.3g} > {HALF_MAX:g})"
    return None


def check_ranges(engine, inputs: dict, model: str, data_type: str) -> RangeCheck:
    """Run `engine` on `inputs` once and look at every float node output."""
    half = data_type.startswith("fp16")
    result = RangeCheck(model, data_type, half)
    gpu = getattr(engine, "gpu", None)
    counted = gpu is not None and gpu.counters is not None
    on_gpu = {n.index for n in engine.nodes if counted and gpu.runs(n.op)}

    def after(flags, node) -> None:
        if node.index in on_gpu:
            return   # judged by the GPU's own counts below
        for t in node.outputs:
            if np.dtype(t.dtype).kind != "f":
                continue   # quantized and integer tensors cannot overflow this way
            result.checked += 1
            problem = _problem(np.asarray(t.data, dtype=np.float64), half and not counted)
            if problem:
                result.findings.append(RangeFinding(node.index, node.name, node.type, t.name, problem))

    handle = register(engine, after, Event.AFTER)
    try:
        engine.run(inputs)
    finally:
        unregister(engine, handle)
    if counted:
        _gpu_findings(result, gpu.range_counts(engine.nodes))
    return result


def _gpu_findings(result: RangeCheck, counts: list) -> None:
    bad = {(c.index, c.name) for c in flagged(counts)}
    found = {(f.index, f.tensor) for f in result.findings}   # a CPU op's NaN, seen by the observer too
    for c in counts:
        result.checked += 1
        if (c.index, c.name) in bad and (c.index, c.output) not in found:
            result.findings.append(RangeFinding(c.index, c.name, c.type, c.output, problem(c)))
    result.findings.sort(key=lambda f: f.index)
    notes = range_notes(counts, result.data_type)
    result.hint = notes[-1] if notes else ""
