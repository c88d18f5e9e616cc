"""`run` on a device: lock it, check its Python, push, run mace_run.pyz there, pull, validate here.

Steps, each named in errors (`device board: push: ...`) and each limited to --device_timeout:
  lock        wait for other runs on this device (locks.py)
  connect     log in, check python >= 3.10 and numpy, that its CPU runs the build's ABI, create
              <work_dir>/<library>/
  push        runner, models, OpenCL files and inputs, in one transfer
  verify      sizes and sha256 on the device (a transfer cut short is caught here)
  run MODEL   python3 mace_run.pyz ... (the runner stops itself at the time limit too)
  pull MODEL  the outputs, checked against the sha256 the runner reported
  pull opencl the OpenCL cache files the board compiled or tuned (gpu, cpu+gpu), into
              builds/<library>/opencl/<abi>/ under MACE's per-device names, so the next run
              pushes them back and starts warm
The model's runtime is the runner's (--runtime): the GPU engine where the board's Python has
pyopencl and an OpenCL device (else its CPU, with a note naming the board and why), the
DspBackend chosen in the deployment file for dsp.
The lock is released before validating: the framework runs on this machine.
`benchmark` uses the same path with benchmark=True: the step is `benchmark MODEL`, the runner
measures MACE's benchmark tables there (mace.report.benchmark) and sends them back as JSON,
and nothing is pulled (a benchmark writes no outputs).
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import tempfile
import threading
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from mace.config.deployment import DeploymentConfig
from mace.config.files import converted_paths, library_dir, make_inputs, write_outputs
from mace.config.hints import command_hint
from mace.devices import process
from mace.devices.base import HOST_CPU, DeviceError, abi_of_machine, machine_runs
from mace.devices.build import RUNNER, built_for, file_entry
from mace.devices.discovery import Target
from mace.devices.locks import device_lock
from mace.devices.runner_options import RunnerOptions
from mace.errors import MaceError, ModelError
from mace.ir.args import get_arg
from mace.ir.model_io import load_net
from mace.report.benchmark import BenchmarkResult
from mace.runtime.dsp.engine import backend_choice
from mace.runtime.gpu.cache_files import KERNELS, TUNING, cache_path
from mace.runtime.gpu.deploy import GPU_RUNTIMES
from mace.runtime.gpu.options import gpu_options
from mace.runtime.profiler import OpStat
from mace.runtime.results import ModelRunResult, Timing
from mace.util.atomic import new_file_mode
from mace.validate.outputs import validate_outputs
from mace.ir.runtimes import DSP_BACKEND_RUNTIMES
from mace.runtime.run_options import RunOptions

MIN_PYTHON = (3, 10)
INDEXED_OUTPUT = re.compile(r"output\d+\.npy")   # the runner's --indexed_outputs files

# Run by the device's python with `-c`: plain enough for any Python, so an old one can be named.
PREFLIGHT = """import json, os, platform, sys
info = {"python": platform.python_version(), "machine": platform.machine()}
try:
    import numpy
    info["numpy"] = numpy.__version__
except Exception as e:
    info["numpy_error"] = "%s: %s" % (type(e).__name__, e)
try:
    os.makedirs(sys.argv[1])
except OSError:
    pass
info["writable"] = os.path.isdir(sys.argv[1]) and os.access(sys.argv[1], os.W_OK)
print(json.dumps(info))
"""

VERIFY = """import hashlib, json, os, sys
bad = []
for path, (size, digest) in sorted(json.loads(sys.argv[1]).items()):
    if not os.path.isfile(path):
        bad.append("%s is missing" % path)
        continue
    if os.path.getsize(path) != size:
        bad.append("%s has %d of %d bytes" % (path, os.path.getsize(path), size))
        continue
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if h.hexdigest() != digest:
        bad.append("%s differs from the file sent" % path)
print(json.dumps(bad))
"""


@dataclass
class BenchmarkRun:
    """A model's benchmark tables and where they were measured (`host` or a device)."""
    model: str
    result: BenchmarkResult
    device: str = "host"
    device_info: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    init_ms: float | None = None


@dataclass
class _Job:
    """One model's files and inputs, prepared on the host before the device is locked."""
    model: object
    pb: Path
    data: Path
    inputs: dict
    input_source: str
    input_files: list               # local .npy files, one per input, in input order
    notes: list


@dataclass
class _OpenCl:
    """A board's OpenCL cache files: local folder builds/<library>/opencl/<abi>/, their names."""
    local_dir: Path
    library: str
    cache_name: str                 # Device.opencl_name(): <model>.<soc>

    def path(self, kind: str) -> Path:
        return cache_path(self.local_dir, self.library, kind, self.cache_name)

    def present(self) -> list:
        return [p for p in (self.path(KERNELS), self.path(TUNING)) if p.is_file()]


def output_dir_for(output_dir, device_name: str, several: bool):
    """--output_dir DIR: DIR for one device, DIR/<device> when several run."""
    if not output_dir:
        return None
    return str(Path(output_dir) / device_name) if several else output_dir


def run_on_targets(config: DeploymentConfig, targets: list, opts: RunOptions, notify=print,
                   several: bool | None = None) -> tuple:
    """Run on every target, devices in parallel; returns (results, errors): one failed device
    does not stop the others. `several`: whether outputs go to per-device folders (default:
    more than one target here)."""
    several = len(targets) > 1 if several is None else several
    per_device = [replace(opts, output_dir=output_dir_for(opts.output_dir, t.device.name, several))
                  for t in targets]
    if len(targets) == 1:
        try:
            return run_on_device(config, targets[0], per_device[0], notify), []
        except MaceError as e:
            return [], [e]
    outcomes = [None] * len(targets)

    def work(i, target):
        try:
            outcomes[i] = run_on_device(config, target, per_device[i], notify)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread below
            outcomes[i] = e

    threads = [threading.Thread(target=work, args=(i, t), daemon=True) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)  # a short join keeps Ctrl-C working
    except KeyboardInterrupt:
        process.kill_all()
        raise
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, MaceError):
            raise outcome
    results = [r for o in outcomes if isinstance(o, list) for r in o]
    return results, [o for o in outcomes if isinstance(o, MaceError)]


def run_on_device(config: DeploymentConfig, target: Target, opts: RunOptions, notify=print) -> list:
    device, abi = target.device, target.abi
    built = built_for(config, abi, opts.build_dir)
    remote_dir = posixpath.join(device.work_dir, config.library_name)
    opencl = _OpenCl(library_dir(config, opts.build_dir) / "opencl" / abi, config.library_name,
                     device.opencl_name())
    with tempfile.TemporaryDirectory(prefix="mace-device-") as tmp:
        jobs = [_prepare(config, name, opts, Path(tmp)) for name in opts.models or list(config.models)]
        with device_lock(device, opts.lock_timeout, notify):
            env = _connect(device, abi, remote_dir, opts.timeout)
            _push(device, built, jobs, remote_dir, opts.timeout, opencl.present())
            raw = []
            for job in jobs:
                raw.append(_run_model(device, config, job, remote_dir, opts, Path(tmp), opencl))
                raw[-1]["pulled_opencl"] = _pull_opencl(device, raw[-1], remote_dir, opts.timeout, opencl)
        info = dict(env, abi=abi, address=device.describe(), soc=",".join(device.target_socs),
                    board=device.model)
        return [_result(config, device, abi, job, r, info, opts) for job, r in zip(jobs, raw)]


def _prepare(config, name: str, opts: RunOptions, tmp: Path) -> _Job:
    model = config.models[name]
    sg = model.graph
    pb, data = converted_paths(config, model, opts.build_dir, command="build")
    inputs, source = make_inputs(config, sg, opts.input_dir, opts.seed, opts.build_dir)
    files = []
    for i, spec in enumerate(sg.inputs):
        files.append(tmp / f"{name}.input{i}.npy")
        np.save(files[-1], inputs[spec.name])
    notes = []
    try:
        src = get_arg(load_net(pb), "source_sha256", "")
    except ModelError:
        src = ""  # the device reads the model, and says what is wrong with it in its own step
    if src and src != model.model_sha256_checksum:
        notes.append(f"{model.model_file_path} changed since it was converted: "
                     f"run `{command_hint('build', config, opts.build_dir)}`")
    return _Job(model, pb, data, inputs, source, files, notes)


# ---- steps on the device ----------------------------------------------------------------
def _connect(device, abi: str, remote_dir: str, timeout: float) -> dict:
    step = "connect"
    done = device.shell([device.python, "-c", PREFLIGHT, remote_dir], timeout, step)
    if done.returncode == 127 or ("not found" in done.stderr and not done.stdout.strip()):
        raise DeviceError(device.name, step, f"'{device.python}' is not found on the device: install "
                                             f"python3 and numpy there, or set `python:` in the devices .yml")
    info = _last_json(done)
    if info is None:
        raise DeviceError(device.name, step, f"'{device.python}' failed: {done.last_line()}")
    version = tuple(int(x) for x in info["python"].split(".")[:2])
    if version < MIN_PYTHON:
        raise DeviceError(device.name, step, f"{device.python} is Python {info['python']}; the runner "
                                             f"needs Python >= {'.'.join(map(str, MIN_PYTHON))}")
    if "numpy" not in info:
        raise DeviceError(device.name, step, f"numpy is missing on the device for {device.python} "
                                             f"({info['numpy_error']}): install it there "
                                             f"(e.g. `{device.python} -m pip install numpy`)")
    _check_machine(device, abi, info["machine"])
    if not info["writable"]:
        raise DeviceError(device.name, step, f"cannot write to {remote_dir} (set `work_dir:` in the "
                                             f"devices .yml)")
    return {k: info[k] for k in ("python", "numpy", "machine")}


def _check_machine(device, abi: str, machine: str) -> None:
    """The build's ABI must be one the device's CPU runs, as its Python reports it: MACE refuses a
    build on a device without that ABI (an x86 board runs the `host` build, docs/devices.md)."""
    if machine_runs(machine, abi):
        return
    build = f"{abi} (this machine's {HOST_CPU})" if abi == "host" else abi
    own = abi_of_machine(machine, android=device.kind == "adb")
    if own:
        named = own + (" (this machine's CPU)" if own == "host" else "")
        where = (f"a devices .yml entry with serial: {device.serial}" if device.source == "adb devices"
                 else device.source)   # getprop's abilist said otherwise: the entry replaces it
        fix = (f"list {named} in its target_abis ({where}) and in the deployment file's target_abis, "
               f"then build and run again")
    else:
        fix = "no ABI of MACE's builds for it"
    raise DeviceError(device.name, "connect", f"its {device.python} reports a {machine} CPU (platform.machine()), "
                                              f"which does not run a build for ABI {build}: {fix}")


def _push(device, built, jobs: list, remote_dir: str, timeout: float, opencl_files: list) -> None:
    # build.json's OpenCL files, and this board's own that earlier runs pulled back
    files = [built.runner, *dict.fromkeys([*built.opencl, *opencl_files])]
    for job in jobs:
        files += [job.pb, job.data, *job.input_files]
    device.push(files, remote_dir, timeout, "push")
    expected = {posixpath.join(remote_dir, f.name): [e["bytes"], e["sha256"]]
                for f in files for e in [file_entry(f)]}
    done = device.shell([device.python, "-c", VERIFY, json.dumps(expected)], timeout, "verify")
    bad = _last_json(done)
    if bad is None:
        raise DeviceError(device.name, "verify", done.last_line())
    if bad:
        raise DeviceError(device.name, "verify", f"the transfer was cut or damaged: {'; '.join(bad)}")


def _runtime_args(config, job: _Job, remote_dir: str, opts: RunOptions, opencl: _OpenCl) -> list:
    """The runner's flags for the model's runtime (values as `--flag=value`: a name from a .yml
    that starts with '-' stays a value)."""
    sg = job.model.graph
    argv = [f"--runtime={sg.runtime}"]
    if sg.runtime in DSP_BACKEND_RUNTIMES:
        backend, where = backend_choice(config, sg)
        return argv + ([f"--dsp_backend={backend}"] if backend else []) + [f"--dsp_backend_where={where}"]
    if sg.runtime not in GPU_RUNTIMES:
        return argv
    # the same builder as the host's (mace/runtime/gpu/options.py): this board's tuned file decides
    options = gpu_options(config.library_name, sg.data_type, sg.limit_opencl_kernel_time, remote_dir,
                          opencl.path(TUNING), config.target_socs, tuning=opts.tuning,
                          auto_tuning=opts.auto_tuning, perf_hint=opts.gpu_perf_hint,
                          priority_hint=opts.gpu_priority_hint, cache_name=opencl.cache_name)
    return argv + options.to_argv()


def runner_options(opts: RunOptions) -> RunnerOptions:
    """How the board's runner runs the model: these run options, as its flags (runner_options.py)."""
    return RunnerOptions(
        round=opts.rounds, omp_num_threads=opts.num_threads if opts.num_threads and opts.num_threads > 0 else -1,
        profile=opts.profile and not opts.benchmark, benchmark=opts.benchmark,
        warmup=opts.warmup if opts.benchmark else 1, cpu_affinity_policy=opts.cpu_affinity_policy,
        restart_round=int(opts.restart_round) if not opts.benchmark else 1,
        cpu_wait_policy=opts.cpu_wait_policy or "", timeout=float(opts.timeout),
        exit_with_parent=True,           # a dropped ssh/adb session ends the run on the board
        indexed_outputs=not opts.benchmark)   # output<i>.npy: no tensor name becomes a remote path


def _run_model(device, config, job: _Job, remote_dir: str, opts: RunOptions, tmp: Path, opencl: _OpenCl) -> dict:
    name = job.model.name
    remote = lambda p: posixpath.join(remote_dir, Path(p).name)  # noqa: E731
    out_dir = posixpath.join(remote_dir, f"{name}.outputs")
    argv = [device.python, remote(RUNNER), "--model", remote(job.pb), "--data", remote(job.data),
            *runner_options(opts).to_argv(), *_runtime_args(config, job, remote_dir, opts, opencl)]
    for spec, f in zip(job.model.graph.inputs, job.input_files):
        argv += ["--input", f"{spec.name}={remote(f)}"]
    if not opts.benchmark:
        argv += ["--output_dir", out_dir]
    step = f"{'benchmark' if opts.benchmark else 'run'} {name}"
    # the runner stops itself at opts.timeout; the extra seconds let it say so over the link
    done = device.shell(argv, opts.timeout + 10, step)
    if done.returncode != 0:
        what = "timed out" if done.returncode == 124 else f"the runner failed (exit {done.returncode})"
        raise DeviceError(device.name, step, f"{what}: {done.last_line()}")
    result = _last_json(done)
    if result is None:
        raise DeviceError(device.name, step, f"no result from the runner: {done.last_line()}")
    if opts.benchmark:
        return result
    local = tmp / f"{name}.outputs"
    local.mkdir()
    if any(not INDEXED_OUTPUT.fullmatch(str(o.get("file"))) for o in result["outputs"]):
        raise DeviceError(device.name, step, "the runner named its output files, not output<i>.npy: the "
                                             "mace_run.pyz on the board is not this build's; nothing was pulled")
    pulled = [posixpath.join(out_dir, o["file"]) for o in result["outputs"]]
    device.pull(pulled, local, opts.timeout, f"pull {name}")
    result["arrays"] = {o["name"]: _load_pulled(device, name, local / o["file"], o) for o in result["outputs"]}
    return result


def _pull_opencl(device, raw: dict, remote_dir: str, timeout: float, opencl: _OpenCl) -> list:
    """Bring back the cache files the board wrote (those that differ from ours): each checked
    against the sha256 the runner reported, then moved into place whole (pulled into a folder
    beside them, so the move is a rename). Only the two names this board's files have are
    taken, whatever else the runner lists."""
    wanted = {opencl.path(kind).name: opencl.path(kind) for kind in (KERNELS, TUNING)}
    changed = [f for f in ((raw.get("engine") or {}).get("opencl") or {}).get("files", [])
               if f.get("file") in wanted and not _same_file(wanted[f["file"]], f)]
    if not changed:
        return []
    step = "pull opencl"
    opencl.local_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=opencl.local_dir) as folder:
        device.pull([posixpath.join(remote_dir, f["file"]) for f in changed], folder, timeout, step)
        for f in changed:
            got = Path(folder) / f["file"]
            if not got.is_file() or file_entry(got)["sha256"] != f["sha256"]:
                raise DeviceError(device.name, step, f"{f['file']} arrived damaged or incomplete "
                                                     f"(sha256 differs from the device's)")
            os.chmod(got, new_file_mode())
            os.replace(got, wanted[f["file"]])
    return [wanted[f["file"]] for f in changed]


def _same_file(path: Path, entry: dict) -> bool:
    return path.is_file() and file_entry(path)["sha256"] == entry.get("sha256")


def _load_pulled(device, model: str, path: Path, entry: dict) -> np.ndarray:
    if not path.is_file() or file_entry(path)["sha256"] != entry["sha256"]:
        raise DeviceError(device.name, f"pull {model}", f"output {entry['file']} arrived damaged or "
                                                        f"incomplete (sha256 differs from the device's)")
    return np.load(path, allow_pickle=False)


def _last_json(done):
    """The runner and the checks print one JSON line last; anything else printed before is noise."""
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1]) if lines and done.returncode == 0 else None
    except ValueError:
        return None


# ---- back on the host ---------------------------------------------------------------------
def _notes(device, abi: str, job: _Job, raw: dict, info: dict) -> list:
    notes = list(job.notes)
    affinity = raw.get("affinity") or {}
    if affinity.get("policy") and not affinity.get("applied"):
        notes.append(f"cpu_affinity_policy {affinity['policy']} ({affinity['name']}) was not applied on "
                     f"device {device.name}: its OS does not let the runner pin threads")
    elif affinity.get("policy"):
        notes.append(f"cpu_affinity_policy {affinity['policy']} ({affinity['name']}): threads pinned to "
                     f"cores {affinity['cores']} of device {device.name}")
    inits = raw.get("restart_init_ms") or []
    if len(inits) > 1:
        notes.append(f"restart_round {len(inits)}: engine created {len(inits)} times on device {device.name}, "
                     "init(ms) " + ", ".join(f"{float(t):.3f}" for t in inits) + "; the table shows the last")
    return notes + _engine_notes(device, job, raw)


def _engine_notes(device, job: _Job, raw: dict) -> list:
    """What the runner said about its engine (GPU placement and cache use, the DSP backend), the
    CPU fallback of a board without OpenCL, and the cache files brought back."""
    engine = raw.get("engine") or {}
    notes = [f"device {device.name}: {n}" for n in engine.get("notes", [])]
    if engine.get("fallback"):
        notes.append(f"device {device.name} has no usable OpenCL device ({engine['fallback']}): runtime "
                     f"{job.model.graph.runtime} ran every op on the board's CPU")
    notes += [f"device {device.name}: {n}" for n in raw.get("range_notes", [])]   # fp16 storage counts
    if engine.get("kernels"):
        ran = kernels_ran(engine["kernels"], engine.get("compiled", False), (raw.get("environment") or {}).get(
            "numba", ""), engine.get("jit_target", ""), (engine.get("loops") or {}).get("skipped", ""))
        notes.append(f"device {device.name} ran {ran}")
    pulled = raw.get("pulled_opencl") or []
    if pulled:
        notes.append(f"device {device.name}: OpenCL cache files brought back for the next run: "
                     + ", ".join(map(str, pulled)))
    return notes


KERNEL_KINDS = {"cpu": "numpy reference kernels", "int8": "int8 reference kernels", "gpu": "OpenCL kernels"}


def kernels_ran(counts: dict, compiled: bool, numba: str = "", target: str = "", skipped: str = "") -> str:
    """'4 ops on fast kernels, numpy paths (no numba there) (cpu:fast), 1 op on numpy reference
    kernels (cpu)'; where the board's numba compiled the loops, 'compiled with numba 0.61.2 for
    cortex-a72'; where it has numba but the loops did not load, why (`skipped`: the runner's)."""
    if compiled:
        how = "compiled with numba" + (f" {numba}" if numba else "") + (f" for {target}" if target else "")
    elif numba:
        how = f"numpy paths (numba {numba} there, but {skipped or 'its loops did not load'})"
    else:
        how = "numpy paths (no numba there)"
    kinds = dict(KERNEL_KINDS, **{"cpu:fast": f"fast kernels, {how}", "int8:fast": f"fast int8 kernels, {how}"})
    parts = [f"{n} op{'s' * (n != 1)} on {kinds.get(tag, tag + ' kernels')} ({tag})"
             for tag, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return ", ".join(parts)


def _benchmark_result(device, job: _Job, raw: dict, info: dict, notes: list) -> BenchmarkRun:
    try:
        result = replace(BenchmarkResult.from_dict(raw["benchmark"]), model=job.model.name)
    except (KeyError, TypeError) as e:  # a runner of another version
        raise DeviceError(device.name, f"benchmark {job.model.name}", f"the runner's result cannot be "
                                                                      f"read ({type(e).__name__}: {e})") from None
    return BenchmarkRun(job.model.name, result, device.name, info, notes, raw.get("timing", {}).get("init_ms"))


def _result(config, device, abi: str, job: _Job, raw: dict, info: dict, opts: RunOptions):
    notes = _notes(device, abi, job, raw, info)
    ran = raw.get("environment") or {}   # the runner's own view: CPU model, cores, numba, kernels
    info = dict(info, **{k: ran[k] for k in ("cpu", "cores", "numba") if k in ran},
                kernels=(raw.get("engine") or {}).get("kernels") or {},
                compiled=bool((raw.get("engine") or {}).get("compiled")),   # the numba loops, or numpy paths
                jit_target=(raw.get("engine") or {}).get("jit_target") or "")
    if opts.benchmark:
        return _benchmark_result(device, job, raw, info, notes)
    sg = job.model.graph
    timing = Timing(**{f.name: raw["timing"][f.name] for f in fields(Timing)})
    result = ModelRunResult(job.model.name, sg.runtime, job.input_source, timing, raw["arrays"], notes=notes,
                            op_stats=[OpStat(**s) for s in raw.get("op_stats", [])],
                            device=device.name, device_info=info,
                            fallback=str((raw.get("engine") or {}).get("fallback") or ""))
    if opts.output_dir:   # as on the host: .npy, or MACE's raw model_out_<name> files
        write_outputs(opts.output_dir, result.outputs, opts.output_format)
    if opts.validate:
        try:
            result.metrics = validate_outputs(config, job.model, sg, job.inputs, result.outputs,
                                              opts.num_threads, opts.build_dir,
                                              use_files=job.input_source == "validation_inputs_data")
        except MaceError as e:
            raise DeviceError(device.name, f"validate {job.model.name}", str(e)) from None
    return result
