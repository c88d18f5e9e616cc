"""Calibration report: how every tensor of a quantized model got its scale and zero point.

The quantize pass builds it (`calibration_report`) and leaves it in its options;
`convert` writes builds/<library>/model/<model>_quantize_report.txt and .json.

Per activation: the range its source gave (observed), the range actually used after
nudging 0.0 onto an integer (params.activation_params), scale, zero point, and the
source: QAT, range file, calibration, input_ranges, a range fixed by the op (Softmax:
[0, 1]) or inherited from the op's input (Reshape, pooling, ...). Per constant: its
quantized form (per-channel int8 weights, uint8, int32 bias). Ops left float are
listed with the reason, and range-file entries naming no tensor of the model are
counted (a range file from another convert or an obfuscated model).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace.ops.registry import spec
from mace.util.jsonutil import dumps
from mace.util.text import banner, table

REPORT_SUFFIX = "_quantize_report"


@dataclass
class ActivationRow:
    tensor: str                # the float model's name (what range files use)
    stored_as: str             # the uint8 tensor in the quantized model
    op: str                    # the op writing it
    op_type: str
    source: str
    observed_min: float | None  # the range the source gave; None when fixed/inherited
    observed_max: float | None
    min: float                 # the range the integers cover (nudged)
    max: float
    scale: float
    zero_point: int


@dataclass
class ConstRow:
    tensor: str
    kind: str                  # "int8 per-channel (axis N)", "uint8", "int32 bias"
    min: float | None          # None for int32 bias (its scale follows input and weight)
    max: float | None
    scale_min: float           # one value unless per-channel
    scale_max: float
    zero_point: int


@dataclass
class MixedPrecision:
    """What quantize_target_cosine decided: the ops kept float, in the order they were chosen."""
    target: float
    samples: int
    float_ops: list = field(default_factory=list)   # (op, SQNR drop dB, outputs' cosine before)
    steps: list = field(default_factory=list)       # outputs' cosine after each step (first: all int8)
    reached: bool = False
    cpu_ops: list = field(default_factory=list)     # runtime dsp: the float ops placed on the CPU
    added: list = field(default_factory=list)       # how many of float_ops each step added
    # [layers kept float, float ops in all, outputs' cosine, seconds] per quantized run, in order
    trials: list = field(default_factory=list)
    seconds: float = 0.0                            # the search's wall time, float reference included
    bounds: list = field(default_factory=list)      # [max quantized runs, max seconds]
    stopped: str = ""                               # the bound that ended the search early, if one did


@dataclass
class CalibrationReport:
    activations: list = field(default_factory=list)      # ActivationRow, execution order
    constants: list = field(default_factory=list)        # ConstRow
    float_ops: list = field(default_factory=list)        # (op, type, reason)
    unmatched_ranges: list = field(default_factory=list)  # range-file tensors the model lacks
    mixed_precision: MixedPrecision | None = None         # quantize_target_cosine's search

    def renamed(self, tensors: dict, ops: dict) -> "CalibrationReport":
        """The report with names mapped (obfuscate: 1 writes opaque names everywhere)."""
        t, o = (lambda n: tensors.get(n, n)), (lambda n: ops.get(n, n))
        acts = [ActivationRow(**{**vars(r), "tensor": t(r.tensor), "stored_as": t(r.stored_as),
                                 "op": o(r.op)}) for r in self.activations]
        consts = [ConstRow(**{**vars(r), "tensor": t(r.tensor)}) for r in self.constants]
        mixed = self.mixed_precision
        if mixed is not None:
            mixed = MixedPrecision(mixed.target, mixed.samples, [(o(n), d, c) for n, d, c in mixed.float_ops],
                                   list(mixed.steps), mixed.reached, [o(n) for n in mixed.cpu_ops],
                                   list(mixed.added), list(mixed.trials), mixed.seconds,
                                   list(mixed.bounds), mixed.stopped)
        return CalibrationReport(acts, consts, [(o(n), ty, why) for n, ty, why in self.float_ops],
                                 [t(n) for n in self.unmatched_ranges], mixed)


def calibration_report(graph, plan: dict, ranges: dict, sources: dict, domain: dict,
                       params: dict) -> CalibrationReport:
    """Built from the quantize pass's state after the rewrite (see its _Rewriter)."""
    float_name = {q: t for t, q in domain.items()}
    report = CalibrationReport()
    for op in graph.net.op:
        for out in op.output:
            if out in params:
                report.activations.append(_activation(op, out, float_name, ranges, sources, params[out]))
        for t in op.input:
            if t in graph.quant and all(r.tensor != t for r in report.constants):
                report.constants.append(_constant(t, graph.quant[t]))
    report.float_ops = [(op, _op_type(graph, op), why) for op, why in plan.items() if why]
    report.unmatched_ranges = sorted(t for t, s in sources.items()
                                     if s == "range file" and t not in graph.specs)
    return report


def _activation(op, out, float_name, ranges, sources, p) -> ActivationRow:
    tensor = float_name.get(out, out)
    mode = getattr(spec(op.type).kernels.get("int8"), "output_range", "own")
    observed = (None, None)
    if isinstance(mode, tuple):
        source = f"fixed by {op.type} [{mode[0]:g}, {mode[1]:g}]"
    elif tensor in ranges:
        source, observed = sources.get(tensor, "?"), ranges[tensor]
    else:
        source = f"inherited from {float_name.get(op.input[0], op.input[0])}"
    return ActivationRow(tensor, out, op.name, op.type, source, *map(_num, observed),
                         float(p.minval), float(p.maxval), float(p.scale), int(p.zero_point))


def _constant(name, p) -> ConstRow:
    dtype = np.dtype(p.dtype).name
    kind = f"{dtype} per-channel (axis {p.axis})" if p.axis is not None else dtype
    if dtype == "int32":
        kind = "int32 bias" + (" per-channel" if p.axis is not None else "")
    scale = np.asarray(p.scale, np.float64)
    zero = np.asarray(p.zero_point).reshape(-1)
    lo, hi = (None, None) if dtype == "int32" else (float(p.minval), float(p.maxval))  # bias: no range
    return ConstRow(name, kind, lo, hi, float(scale.min()), float(scale.max()), int(zero[0]) if zero.size else 0)


def _op_type(graph, name) -> str:
    return next((op.type for op in graph.net.op if op.name == name), "?")


def _num(v):
    return None if v is None else float(v)


# ---- writing ---------------------------------------------------------------------
def render_text(report: CalibrationReport, model: str) -> str:
    lines = banner(f"Quantization report: {model}")
    lines += ["", f"{len(report.activations)} quantized activations, {len(report.constants)} quantized "
                  f"constants, {len(report.float_ops)} ops left float.",
              "Ranges: observed = what the source gave; used = after nudging 0.0 onto an integer "
              "(real = scale * (q - zero_point)).", ""]
    lines += table(["tensor", "op", "source", "observed min", "observed max", "used min", "used max",
                    "scale", "zero point"],
                   [[r.tensor, f"{r.op} ({r.op_type})", r.source, _g(r.observed_min), _g(r.observed_max),
                     _g(r.min), _g(r.max), _g(r.scale), r.zero_point] for r in report.activations],
                   right={3, 4, 5, 6, 7, 8})
    if report.constants:
        lines += ["", "Constants:"]
        lines += table(["tensor", "kind", "min", "max", "scale", "zero point"],
                       [[r.tensor, r.kind, _g(r.min), _g(r.max), _scale(r), r.zero_point]
                        for r in report.constants], right={2, 3, 4, 5})
    if report.float_ops:
        lines += ["", "Ops left float (Quantize/Dequantize at their edges):"]
        lines += [f"  {name} ({op_type}): {why}" for name, op_type, why in report.float_ops]
    if report.mixed_precision is not None:
        lines += _mixed_lines(report.mixed_precision)
    if report.unmatched_ranges:
        shown = ", ".join(report.unmatched_ranges[:10])
        lines += ["", f"{len(report.unmatched_ranges)} range-file tensor(s) are not in this model "
                      f"(another convert's names?): {shown}"]
    return "\n".join(lines) + "\n"


def _mixed_lines(m: MixedPrecision) -> list:
    if m.reached:
        verdict = "target met"
    elif m.stopped:
        verdict = f"TARGET NOT MET: stopped by {m.stopped}"
    else:
        verdict = "TARGET NOT MET: every quantizable op tried"
    lines = ["", f"Mixed precision (quantize_target_cosine {m.target:g}, {m.samples} calibration "
                 f"sample(s)): all-int8 outputs' cosine {m.steps[0]:.6f}; "
                 f"{len(m.float_ops)} layer(s) kept float, in the order chosen; final cosine "
                 f"{m.steps[-1]:.6f} ({verdict})"
                 + (f"; {len(m.trials)} quantized run(s) in {m.seconds:.0f} s." if m.trials else ".")]
    for name, drop, before in m.float_ops:
        lines.append(f"  {name}: SQNR drop {drop:.1f} dB in int8 (outputs' cosine {before:.6f} when chosen)")
    for i, (layers, floats, cos, seconds) in enumerate(m.trials, 1):
        lines.append(f"  step {i}: {layers} layer(s) kept float ({floats} float op(s) in all): "
                     f"cosine {cos:.6f} ({seconds:.1f} s)")
    if m.cpu_ops:
        lines.append(f"  runtime dsp: {len(m.cpu_ops)} float op(s) placed on the CPU (the DSP runs the "
                     f"int8 ops; Quantize/Dequantize at the group edges): {', '.join(m.cpu_ops)}")
    return lines


def _g(v) -> str:
    return "-" if v is None else f"{v:.6g}"


def _scale(r: ConstRow) -> str:
    return _g(r.scale_min) if r.scale_min == r.scale_max else f"{_g(r.scale_min)}..{_g(r.scale_max)}"


def write_report(report: CalibrationReport, out_dir: Path, model: str, mapping=None) -> list:
    """Write <model>_quantize_report.txt and .json into out_dir; returns [(file, place under
    builds/<library>/)] as convert's extra files. `mapping`: obfuscate_graph's result."""
    if mapping:
        inverse = {key: {orig: opaque for opaque, orig in mapping.get(key, {}).items()}
                   for key in ("tensors", "ops")}
        report = report.renamed(inverse["tensors"], inverse["ops"])
    out_dir = Path(out_dir)
    txt, js = out_dir / f"{model}{REPORT_SUFFIX}.txt", out_dir / f"{model}{REPORT_SUFFIX}.json"
    txt.write_text(render_text(report, model))
    js.write_text(dumps({"model": model, **vars(report)}) + "\n")
    return [(txt, Path("model") / txt.name), (js, Path("model") / js.name)]
