"""Find where a runtime goes wrong: the first node whose output diverges, no manual bisection.

`converter.py debug` (= `run --locate_divergence`) runs the model in its
framework and on every runtime the deployment file allows (cpu; gpu and dsp
when the subgraph's runtime names them) with the same inputs. For each runtime
it names the first node, in execution order, whose output differs from the
framework beyond the validation threshold and, for runtimes other than cpu, the
first node that differs from the CPU runtime (every tensor can be compared
there, not only those the framework has). Each finding says whether the node
fails on its own (run alone on correct inputs) or only inherits an earlier error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mace.ir import runtimes as runtime_records
from mace.config import schema
from mace.report.dump import capture_outputs
from mace.runtime.engine import Engine
from mace.runtime.gpu.deploy import engine_setup, range_check_notes
from mace.validate.layers import LayerValidation, compare_layers, isolate, validate_layers

# Runtimes each subgraph `runtime` asks for; the CPU runtime is always the baseline.
RUNTIMES = {n: list(r.compared) for n, r in runtime_records.RUNTIMES.items()}   # what each is compared with


@dataclass
class Finding:
    runtime: str
    against: str                       # "framework" or "cpu"
    validation: LayerValidation | None = None
    skipped: str = ""                  # why this comparison was not made
    range_notes: list = field(default_factory=list)   # what fp16 storage clamped / flushed, and the fix

    @property
    def first(self):
        return self.validation.first_failure if self.validation else None


@dataclass
class DebugReport:
    model: str
    runtimes: list
    findings: list = field(default_factory=list)

    @property
    def diverged(self) -> bool:
        return any(f.first is not None for f in self.findings)


def runtime_threshold(sg, runtime: str) -> float:
    """The validation threshold of one runtime (the .yml's validation_threshold wins)."""
    table = dict(schema.DEFAULT_THRESHOLDS, **sg.values.get("validation_threshold", {}))
    key = runtime_records.RUNTIMES[runtime].threshold_key if runtime in runtime_records.RUNTIMES \
        else runtime.upper()
    return table.get(key, sg.threshold())


def _runtime_engine(session, runtime: str):
    """(engine for `runtime`, "") or (None, why this release cannot run it here)."""
    engine = session.engine
    if getattr(engine, "device", "cpu") == runtime:
        return engine, ""
    if runtime == "cpu":
        return Engine(engine.graph, device="cpu"), ""
    options = None
    if runtime == "gpu":

        device, options, notes = engine_setup(session.config, session.subgraph, session.build_dir)
        if device != "gpu":
            return None, "; ".join(notes) or "no usable OpenCL device"
    try:
        candidate = Engine(engine.graph, device=runtime, options=options)
    except Exception as e:  # noqa: BLE001 - any failure to build means "not available here"
        return None, f"the {runtime} runtime cannot load this model: {e}"
    if all(n.tag.startswith("cpu") for n in candidate.nodes):
        return None, f"no {runtime} kernels in this release: every op would run its CPU kernel"
    return candidate, ""


def _range_notes(engine, inputs: dict) -> list:
    """The GPU's per-node fp16 range counts of one whole run (a divergence often starts there)."""
    if getattr(engine, "gpu", None) is None or engine.gpu.counters is None:
        return []
    engine.run(inputs)
    return range_check_notes(engine)


def compare_runtimes(engine, reference, inputs: dict, threshold: float, runtime: str,
                     model: str = "") -> LayerValidation:
    """Every node output of `engine` against the same tensor of `reference` (same IR, same layouts)."""
    _, ref = capture_outputs(reference, inputs)
    _, ours = capture_outputs(engine, inputs)
    result = compare_layers(engine, ours, ref, {}, threshold, model, runtime, against="cpu")
    feeds = dict(ref)
    for name in engine.graph.input_names:
        feeds[name] = np.asarray(inputs[name])
    for c in result.checks:
        if not c.passed:
            c.isolated_cosine = isolate(engine, c, feeds, ref[c.tensor])
    return result


def locate_divergence(session, num_threads: int = 0) -> DebugReport:
    sg = session.subgraph
    runtimes = RUNTIMES.get(sg.runtime, ["cpu"])
    report = DebugReport(session.model.name, runtimes)
    cpu = None
    for runtime in runtimes:
        engine, why = _runtime_engine(session, runtime)
        if engine is None:
            report.findings.append(Finding(runtime, "framework", skipped=why))
            continue
        cpu = engine if runtime == "cpu" else cpu
        threshold = runtime_threshold(sg, runtime)
        report.findings.append(Finding(runtime, "framework", validate_layers(
            session, num_threads, engine=engine, runtime=runtime, threshold=threshold),
            range_notes=_range_notes(engine, session.inputs)))
        if runtime != "cpu" and cpu is not None:
            report.findings.append(Finding(runtime, "cpu", compare_runtimes(
                engine, cpu, session.inputs, threshold, runtime, session.model.name)))
    return report
