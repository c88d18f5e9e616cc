"""`run`: execute converted models, time them, and validate against the original framework.

Inputs come from `--input_dir DIR/<name>.npy`, else the subgraph's
validation_inputs_data, else seeded uniform random values in input_ranges.
Tensor names become file names by `safe_name` (documented in docs/cli.md).
"""
from __future__ import annotations

import re
import statistics
import time
import zlib
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace.codegen.generate import code_dir
from mace.config.deployment import DeploymentConfig, ModelConfig, SubgraphConfig
from mace.config.fetch import local_path
from mace.config.raw_files import INPUT_PREFIX, OUTPUT_PREFIX, raw_names, read_raw, write_raw
from mace.convert import fetch_model_files, model_paths
from mace.errors import ConfigError, ModelError, RuntimeInputError
from mace.frontends import FRAMEWORK_FORMATS
from mace.frontends.base import user_to_framework
from mace.ir.args import get_arg
from mace.runtime.affinity import pin_threads
from mace.runtime.dsp import backend_choice, create_dsp_engine
from mace.runtime.engine import create_engine
from mace.runtime.from_code import create_engine_from_package
from mace.runtime.gpu.deploy import engine_notes, engine_setup
from mace.runtime.profiler import OpProfiler
from mace.transform.placement_groups import describe as describe_placement
from mace.validate.metrics import compare
from mace.validate.reference import backend_note, reference_runner


@dataclass
class Timing:
    init_ms: float
    warmup_ms: float
    rounds: int = 0
    avg_ms: float = 0.0
    median_ms: float = 0.0
    min_ms: float = 0.0
    max_ms: float = 0.0
    std_ms: float = 0.0


@dataclass
class ModelRunResult:
    model: str
    runtime: str
    input_source: str
    timing: Timing
    outputs: dict = field(default_factory=dict)
    metrics: list = field(default_factory=list)   # OutputMetrics when validated
    notes: list = field(default_factory=list)
    op_stats: list = field(default_factory=list)  # profiler.OpStat per op when profiled
    device: str = "host"                           # where it ran (mace/devices for the others)
    device_info: dict = field(default_factory=dict)  # a device's python, numpy, machine, abi

    @property
    def passed(self) -> bool:
        return all(m.passed for m in self.metrics)


def safe_name(tensor: str) -> str:
    """File-safe form of a tensor name: '/', ':' and '\\' become '_'."""
    return re.sub(r"[/:\\]", "_", tensor)


def file_names(tensors, what: str) -> dict:
    """tensor -> file name; two tensors that would share a file are an error, not an overwrite."""
    names = {}
    for t in tensors:
        f = f"{safe_name(t)}.npy"
        clash = next((other for other, g in names.items() if g == f), None)
        if clash is not None:
            raise ConfigError(f"{what} tensors '{clash}' and '{t}' would both be written/read as {f}")
        names[t] = f
    return names


def _npy(path: Path, spec, where: str) -> np.ndarray:
    try:
        value = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise RuntimeInputError(f"{where}: input file {path} not found") from None
    except (ValueError, OSError) as e:
        raise RuntimeInputError(f"{where}: {path} is not a readable .npy file ({e})") from None
    if tuple(value.shape) != tuple(spec.shape):
        # Only a reshape that keeps the element order (dims of 1 added or dropped) is taken as
        # meant; same size in another order (NCHW data for an NHWC input) would be silently wrong.
        squeeze = [d for d in value.shape if d != 1] == [d for d in spec.shape if d != 1]
        if value.size == int(np.prod(spec.shape)) and squeeze:
            value = value.reshape(spec.shape)
        else:
            raise RuntimeInputError(f"{where}: {path} has shape {list(value.shape)}, input '{spec.name}' "
                                    f"expects {list(spec.shape)} ({spec.data_format})")
    return value.astype(spec.dtype)


def _input_file(directory: Path, spec, npy_name: str, raw_name: str) -> np.ndarray:
    """DIR/<name>.npy (ours) or DIR/model_input_<name> (MACE's raw bytes): the name says which."""
    if (directory / npy_name).is_file() or not (directory / raw_name).is_file():
        if not (directory / npy_name).is_file():
            raise RuntimeInputError(f"--input_dir: input file {directory / npy_name} not found (nor MACE's "
                                    f"raw {directory / raw_name}) for input '{spec.name}'")
        return _npy(directory / npy_name, spec, "--input_dir")
    return read_raw(directory / raw_name, spec, "--input_dir")


def write_outputs(output_dir, outputs: dict, output_format: str = "npy") -> None:
    """DIR/<name>.npy, or MACE's raw DIR/model_out_<name> (`--output_format raw`)."""
    out = Path(output_dir)
    raw = output_format == "raw"
    files = raw_names(OUTPUT_PREFIX, outputs, "output") if raw else file_names(outputs, "output")
    out.mkdir(parents=True, exist_ok=True)
    for name, value in outputs.items():
        if raw:
            write_raw(out / files[name], value)
        else:
            np.save(out / files[name], value)


def make_inputs(config: DeploymentConfig, sg: SubgraphConfig, input_dir: Path | None, seed: int = 0):
    """(inputs in the caller's layout, a word saying where they came from)."""
    specs = sg.inputs
    if input_dir:
        files = file_names([s.name for s in specs], "input")
        raw = raw_names(INPUT_PREFIX, [s.name for s in specs], "input")
        return {s.name: _input_file(Path(input_dir), s, files[s.name], raw[s.name])
                for s in specs}, f"files in {input_dir}"
    if sg.validation_inputs_data:
        return {s.name: _npy(local_path(f, config.base_dir), s, f"{sg.key_path}.validation_inputs_data")
                for s, f in zip(specs, sg.validation_inputs_data)}, "validation_inputs_data"
    inputs = {}
    for s in specs:
        rng = np.random.default_rng(seed + zlib.crc32(s.name.encode()))
        lo, hi = s.value_range
        if s.dtype.startswith(("int", "uint")):
            inputs[s.name] = rng.integers(int(lo), int(hi) + 1, s.shape).astype(s.dtype)
        else:
            inputs[s.name] = rng.uniform(lo, hi, s.shape).astype(s.dtype)
    return inputs, f"random in input_ranges (seed {seed})"


def _timed(fn):
    t = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - t) * 1000.0


def _thread_limit(num_threads: int):
    if not num_threads or num_threads < 0:
        return nullcontext()
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=num_threads)


def _reference_files(config, sg: SubgraphConfig) -> dict:
    """validation_outputs_data: the expected outputs, one .npy per output in the caller's layout."""
    where = f"{config.path}: {sg.key_path}.validation_outputs_data"
    ref = {}
    for s, f in zip(sg.outputs, sg.validation_outputs_data):
        path = local_path(f, config.base_dir)
        try:
            ref[s.name] = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise RuntimeInputError(f"{where}: output file {path} not found") from None
        except (ValueError, OSError) as e:
            raise RuntimeInputError(f"{where}: {path} is not a readable .npy file ({e})") from None
    return ref


def validate_outputs(config, model: ModelConfig, sg: SubgraphConfig, inputs: dict, outputs: dict,
                     num_threads: int = 0, build_dir=None, use_files: bool = False) -> list:
    """Compare `outputs` with the original framework on the same `inputs`, or with the
    validation_outputs_data files (`use_files`: the inputs are validation_inputs_data)."""
    if use_files and sg.validation_outputs_data:
        ref = _reference_files(config, sg)
        return [_compare(config, model, s.name, ref[s.name], outputs[s.name], sg.threshold())
                for s in sg.outputs]
    fw_format = FRAMEWORK_FORMATS[model.platform]
    model_path, weight_path = fetch_model_files(config, model, build_dir)
    fw_inputs = {}
    for s in sg.inputs:
        perm = user_to_framework(s.shape, s.data_format, fw_format)
        fw_inputs[s.name] = inputs[s.name].transpose(perm) if perm else inputs[s.name]
    weights = {"weight_path": weight_path} if weight_path else {}  # Caffe's .caffemodel
    ref = reference_runner(model.platform)(model_path, fw_inputs, list(sg.output_tensors),
                                           max(num_threads, 0), **weights)  # 0: the framework's default
    metrics = []
    for s in sg.outputs:
        value = ref[s.name]
        perm = user_to_framework(value.shape, fw_format, s.data_format) \
            if s.data_format != "NONE" else None
        value = value.transpose(perm) if perm else value
        metrics.append(_compare(config, model, s.name, value, outputs[s.name], sg.threshold()))
    return metrics


def _compare(config, model, name, ref, out, threshold):
    try:
        return compare(name, ref, out, threshold)
    except ValueError as e:
        raise ModelError(f"{config.path}: {model.key_path}: {e}") from None


def run_model(config: DeploymentConfig, model: ModelConfig, build_dir=None, rounds: int = 1,
              validate: bool = False, input_dir=None, output_dir=None, num_threads: int = 0,
              seed: int = 0, profile: bool = False, tuning: bool = False, gpu_perf_hint: int = 0,
              gpu_priority_hint: int = 0, cpu_affinity_policy: int = 0, auto_tuning: bool = True,
              restart_round: int = 1, output_format: str = "npy") -> ModelRunResult:
    sg = model.graph
    pb_path, data_path = model_paths(config, model.name, build_dir)
    if not pb_path.exists():
        flag = f" --build_dir={build_dir}" if build_dir and Path(build_dir) != Path("builds") else ""
        raise ConfigError(f"model '{model.name}' has not been converted ({pb_path} is missing): "
                          f"run `python tools/converter.py convert --config={config.path}{flag}` first")
    notes = []
    with _thread_limit(num_threads):
        if cpu_affinity_policy and not pin_threads(cpu_affinity_policy, num_threads):
            notes.append(f"cpu_affinity_policy {cpu_affinity_policy}: this OS does not let us pin threads")
        restarts = max(int(restart_round), 1)
        inits = []
        for restart in range(restarts):  # MACE's --restart_round: a fresh engine each time
            engine, init_ms, setup_notes = _load_engine(config, model, pb_path, data_path, build_dir, tuning,
                                                        gpu_perf_hint, gpu_priority_hint, auto_tuning)
            inits.append(init_ms)
            if restart == 0:
                notes += setup_notes
                inputs, source = make_inputs(config, sg, input_dir, seed)
            outputs, warmup_ms = _timed(lambda: engine.run(inputs))
            timing = Timing(init_ms, warmup_ms)
            profiler = OpProfiler() if profile and restart == restarts - 1 else None
            if profiler:
                engine.observers.append(profiler)
            if rounds > 0:
                times = [_timed(lambda: engine.run(inputs))[1] for _ in range(rounds)]
                timing = Timing(init_ms, warmup_ms, rounds, statistics.fmean(times), statistics.median(times),
                                min(times), max(times), statistics.pstdev(times))
        if restarts > 1:
            notes.append(f"restart_round {restarts}: engine created {restarts} times, init(ms) "
                         + ", ".join(f"{t:.3f}" for t in inits) + "; the table shows the last")
    result = ModelRunResult(model.name, sg.runtime, source, timing, outputs, notes=notes,
                            op_stats=profiler.stats() if profiler else [])
    if output_dir:
        write_outputs(output_dir, outputs, output_format)
    if validate:
        note = backend_note(model.platform, sg.backend)
        if note and not (source == "validation_inputs_data" and sg.validation_outputs_data):
            result.notes.append(note)   # the framework is the reference: say which one, as asked
        result.metrics = validate_outputs(config, model, sg, inputs, outputs, num_threads, build_dir,
                                          use_files=source == "validation_inputs_data")
    return result


def _load_engine(config, model, pb_path, data_path, build_dir, tuning, perf_hint, priority_hint,
                 auto_tuning) -> tuple:
    """(engine, init ms, notes) on the subgraph's runtime, as a deployment would load it."""
    sg = model.graph
    device, options, notes = engine_setup(config, sg, build_dir, tuning, perf_hint, priority_hint,
                                          auto_tuning=auto_tuning)  # runtime gpu / cpu+gpu
    if sg.runtime == "dsp":  # a DspBackend (mace/runtime/dsp): the Hexagon simulator by default
        backend, where = backend_choice(config, sg)
        engine, init_ms = _timed(lambda: create_dsp_engine(pb_path, data_path, backend, where=where))
        notes = notes + [engine.describe()]
    elif config.model_graph_format == "code":  # load it as a deployment would: the generated package
        package = code_dir(pb_path.parent.parent, config.library_name)
        engine, init_ms = _timed(lambda: create_engine_from_package(package, model.name, data_path,
                                                                    device=device, options=options))
    else:
        engine, init_ms = _timed(lambda: create_engine(pb_path, data_path, device=device, options=options))
    notes = notes + engine_notes(engine)
    notes += describe_placement(engine.graph) if hasattr(engine, "graph") else []  # mixed runtimes
    # the deployment file's checksum names the model file: no need to read (or download) it
    src = get_arg(engine.graph.net, "source_sha256", "")
    if src and src != model.model_sha256_checksum:
        notes.append(f"{model.model_file_path} changed since it was converted: run convert again")
    return engine, init_ms, notes


def run_deployment(config: DeploymentConfig, models=None, **kwargs) -> list:
    names = list(models or config.models)
    for n in names:
        if n not in config.models:
            raise ConfigError(f"{config.path}: no model named '{n}'; models: {', '.join(config.models)}")
    return [run_model(config, config.models[n], **kwargs) for n in names]
