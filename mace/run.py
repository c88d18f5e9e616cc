"""`run`: execute converted models, time them, and validate against the original framework.

Inputs come from `--input_dir DIR/<name>.npy`, else the subgraph's
validation_inputs_data, else seeded uniform random values in input_ranges
(mace/config/files.py, which also names the files: docs/cli.md).
"""
from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from mace.config.deployment import DeploymentConfig, ModelConfig
from mace.errors import ConfigError
from mace.config.files import file_names, make_inputs, models_of
from mace.runtime.affinity import pin_threads, thread_limit
from mace.runtime.open import open_engine
from mace.runtime.profiler import OpProfiler
from mace.runtime.results import ModelRunResult, Timing, timed
from mace.transform.placement.groups import describe as describe_placement
from mace.validate.outputs import validate_outputs


def run_model(config: DeploymentConfig, model: ModelConfig, build_dir=None, rounds: int = 1,
              validate: bool = False, input_dir=None, output_dir=None, num_threads: int = 0,
              seed: int = 0, profile: bool = False, tuning: bool = False, gpu_perf_hint: int = 0,
              gpu_priority_hint: int = 0, cpu_affinity_policy: int = 0) -> ModelRunResult:
    sg = model.graph
    notes = []
    with thread_limit(num_threads):
        if cpu_affinity_policy and not pin_threads(cpu_affinity_policy, num_threads):
            notes.append(f"cpu_affinity_policy {cpu_affinity_policy}: this OS does not let us pin threads")
        opened = open_engine(config, model, build_dir, tuning=tuning, gpu_perf_hint=gpu_perf_hint,
                             gpu_priority_hint=gpu_priority_hint)
        engine = opened.engine
        notes += opened.notes + describe_placement(engine.graph)   # mixed runtimes
        inputs, source = make_inputs(config, sg, input_dir, seed)
        outputs, warmup_ms = timed(lambda: engine.run(inputs))
        timing = Timing(opened.init_ms, warmup_ms)
        profiler = OpProfiler() if profile else None
        if profiler:
            engine.observers.append(profiler)
        if rounds > 0:
            times = [timed(lambda: engine.run(inputs))[1] for _ in range(rounds)]
            timing = Timing(opened.init_ms, warmup_ms, rounds, statistics.fmean(times),
                            statistics.median(times), min(times), max(times), statistics.pstdev(times))
    result = ModelRunResult(model.name, sg.runtime, source, timing, outputs, notes=notes,
                            op_stats=profiler.stats() if profiler else [])
    if output_dir:
        out = Path(output_dir)
        files = file_names(outputs, "output")
        out.mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            np.save(out / files[name], value)
    if validate:
        result.metrics = validate_outputs(config, model, sg, inputs, outputs, num_threads, build_dir,
                                          use_files=source == "validation_inputs_data")
    return result


def run_deployment(config: DeploymentConfig, models=None, **kwargs) -> list:
    out = kwargs.get("output_dir")
    if out and Path(out).exists() and not Path(out).is_dir():   # before minutes of running
        raise ConfigError(f"--output_dir {out}: not a folder (a file of that name exists)")
    return [run_model(config, m, **kwargs) for m in models_of(config, models)]
