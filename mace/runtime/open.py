"""One way to open the engine of a built model: `open_engine(config, model)`.

Used by run, the reports (benchmark, online report, dumps, layer validation,
debug), calibration statistics and the tracer, so they all load a model the
same way: the subgraph's runtime (gpu / cpu+gpu through the OpenCL setup, dsp
through its DspBackend), `model_graph_format: code` through the generated
package, or the .pb + .data. Before loading, the build is checked against its
manifest (torn or changed files) and against the deployment file (stale builds):
mace/config/provenance.py.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from mace.config.files import code_dir, converted_paths, library_dir
from mace.config.provenance import check_build
from mace.runtime import backends
from mace.runtime.dsp.engine import backend_choice
from mace.runtime.gpu.deploy import GPU_RUNTIMES, engine_notes, engine_setup
from mace.ir.runtimes import DSP_BACKEND_RUNTIMES


@dataclass
class Opened:
    engine: object
    pb_path: Path
    data_path: Path
    init_ms: float
    notes: list = field(default_factory=list)
    fallback: str = ""      # why a GPU runtime opened on the CPU (cpu+gpu without OpenCL)


def open_engine(config, model, build_dir=None, *, tuning: bool = False, gpu_perf_hint: int = 0,
                gpu_priority_hint: int = 0, auto_tuning: bool = True, options: dict | None = None,
                command: str = "convert") -> Opened:
    """Load `model` of `config` as built under build_dir on its subgraph's runtime; `options` are
    extra engine options; `command` is the one a missing build asks for (convert, or build);
    `auto_tuning=False` is MACE's --disable_tuning (gpu/deploy.py)."""
    sg = model.graph
    pb_path, data_path = converted_paths(config, model, build_dir, command)
    check_build(config, model, build_dir)
    runtime = sg.runtime
    req = backends.Request(model_name=model.name)
    if runtime in DSP_BACKEND_RUNTIMES:   # a DspBackend (mace/runtime/dsp): the Hexagon simulator by default
        req.dsp_backend, req.where = backend_choice(config, sg)
        req.options = options
    else:
        req.device, gpu_options, req.notes = engine_setup(config, sg, build_dir, tuning, gpu_perf_hint,
                                                          gpu_priority_hint, auto_tuning=auto_tuning)
        req.options = {**(gpu_options or {}), **(options or {})} or None
        if config.model_graph_format == "code":
            req.code_package = code_dir(library_dir(config, build_dir), config.library_name)
    start = time.perf_counter()
    engine = backends.load(runtime, pb_path, data_path, req)
    init_ms = (time.perf_counter() - start) * 1000.0
    notes = list(req.notes)
    notes += [engine.describe()] if runtime in DSP_BACKEND_RUNTIMES else engine_notes(engine)
    fallback = "; ".join(req.notes) if runtime in GPU_RUNTIMES and req.device == "cpu" else ""
    return Opened(engine, pb_path, data_path, init_ms, notes, fallback)

