"""The program that runs on a device, packed into mace_run.pyz by runner_zip.py:

    python3 mace_run.pyz --model M.pb --input NAME=FILE.npy ... --output_dir D --round N

It loads a converted model with our runtime, runs it once (warm-up) and `--round` more times,
writes each output to D/<output name>.npy and prints one JSON line (also written to
D/mace_run.json): init, warm-up and per-round times in ms, their statistics, the output files
with their sha256, and the Python/numpy/machine it ran on. With --benchmark it measures MACE's
benchmark tables instead (mace.report.benchmark, the code `converter.py benchmark` runs on the
host) and sends the BenchmarkResult as JSON. --cpu_affinity_policy pins the threads with
mace.runtime.affinity and says whether it could. --runtime picks the engine (board_engine.py):
the CPU, the GPU engine where this Python has pyopencl and an OpenCL device (the CPU otherwise,
and the result says why), or a DspBackend; the result lists the OpenCL cache files so the host
can pull back what the board compiled or tuned. Exit codes: 0 ok, 1 an error in the
model or inputs, 3 a bug of ours, 124 --timeout passed (or, with --exit_with_parent, the ssh/adb
session that started it ended).

Only the standard library, numpy and mace's runtime may be imported here: the device has
nothing else. numpy is imported after the flags are read, because BLAS reads its thread
count from the environment when it loads; so are the mace modules that import numpy, which is
why this module's imports sit inside its functions (and so a board without numpy gets our
message, not an ImportError). The flags are declared by records that import no numpy
(runner_options.RunnerOptions, mace.runtime.gpu.options.GpuOptions, mace.ir.runtimes): `run`
on the host writes them from the same records, so host and board cannot drift apart.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import statistics
import sys
import threading
import time
import traceback

# No numpy below (the flags are read before BLAS loads); at module level, so mace_run.pyz has them.
from mace.ir.runtimes import BOARD_RUNTIMES
from mace.devices.runner_options import RunnerOptions
from mace.runtime.gpu.options import GpuOptions

RESULT_FILE = "mace_run.json"
# Inside mace_run.pyz: the numba loops (mace/ops/fast/.../_*loops.py) under mace_loops/, where no
# import finds them (runner_zip.py); unpack_loops puts them on disk where numba is installed.
LOOPS = "mace_loops"
TIMEOUT_EXIT = 124
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="mace_run.pyz", description="Run a converted model (.pb + .data) "
                                "with the pymace runtime and report timings as JSON.")
    p.add_argument("--model", required=True, help="the model graph, <model>.pb")
    p.add_argument("--data", default=None, help="the weights (default: the .pb's name with .data)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="one per model input (repeat the flag)")
    p.add_argument("--output_dir", default=None, help="write each output to DIR/<output name>.npy")
    RunnerOptions.add_arguments(p)   # the run loop, as the host writes it (runner_options.py)
    g = p.add_argument_group("runtime (what `converter.py run` passes for the model's runtime)")
    g.add_argument("--runtime", default="cpu", choices=BOARD_RUNTIMES,
                   help="gpu/cpu+gpu: the GPU engine where pyopencl finds an OpenCL device, else the "
                        "CPU (said in the result); dsp: the DspBackend of --dsp_backend")
    GpuOptions.add_arguments(g)   # the GPU options as the host writes them (mace/runtime/gpu/options.py)
    g.add_argument("--dsp_backend", default=None, help="DSP backend name (default hexagon_sim)")
    g.add_argument("--dsp_backend_where", default=None, help="where the backend was named (for errors)")
    p.add_argument("--json", default=None, help=f"where to write the result (default: DIR/{RESULT_FILE})")
    p.add_argument("--verbose", action="store_true", help="print tracebacks")
    return p.parse_args(argv)


def limit_threads(n: int) -> None:
    """Must run before numpy is imported: OpenBLAS and friends read these once, at load."""
    if n and n > 0:
        for var in THREAD_VARIABLES:
            os.environ[var] = str(n)


def start_watchdog(seconds: float) -> None:
    """End the process after `seconds`, even inside a long numpy call: when the host's ssh
    or adb gives up, nothing else would stop a run on the device."""
    if seconds <= 0:
        return

    def expire():
        sys.stderr.write(f"error: timed out after {seconds:g} s\n")
        sys.stderr.flush()
        os._exit(TIMEOUT_EXIT)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def watch_parent() -> None:
    """End the process when its parent does: when the host gives up (timeout, Ctrl-C) it kills its
    ssh, and sshd then leaves this process orphaned, still running, instead of ending it."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(TIMEOUT_EXIT)

    threading.Thread(target=watch, daemon=True).start()


def safe_name(tensor: str) -> str:
    """The file name rule of mace.run.safe_name (kept here: mace.run needs yaml and onnx)."""
    return re.sub(r"[/:\\]", "_", tensor)


def timing_stats(init_ms: float, warmup_ms: float, round_ms: list) -> dict:
    """The statistics `converter.py run` prints, keyed like mace.run.Timing's fields."""
    stats = {"init_ms": init_ms, "warmup_ms": warmup_ms, "rounds": len(round_ms), "avg_ms": 0.0,
             "median_ms": 0.0, "min_ms": 0.0, "max_ms": 0.0, "std_ms": 0.0}
    if round_ms:
        stats.update(avg_ms=statistics.fmean(round_ms), median_ms=statistics.median(round_ms),
                     min_ms=min(round_ms), max_ms=max(round_ms), std_ms=statistics.pstdev(round_ms))
    return stats


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _timed(fn):
    t = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - t) * 1000.0


def read_inputs(specs: list) -> dict:
    import numpy as np

    from mace.errors import RuntimeInputError

    inputs = {}
    for spec in specs:
        name, sep, path = spec.rpartition("=")  # the file is ours; a tensor name may hold '='
        if not sep or not name:
            raise RuntimeInputError(f"--input {spec!r}: expected NAME=FILE.npy")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise RuntimeInputError(f"--input {name}: cannot read {path} ({e})") from None
    return inputs


def write_outputs(outputs: dict, out_dir: str, indexed: bool = False) -> list:
    import numpy as np

    from mace.errors import RuntimeInputError

    os.makedirs(out_dir, exist_ok=True)
    files, written = {}, []
    for i, (name, value) in enumerate(outputs.items()):
        file = f"output{i}.npy" if indexed else f"{safe_name(name)}.npy"
        if file in files:
            raise RuntimeInputError(f"outputs '{files[file]}' and '{name}' would both be written as {file}")
        files[file] = name
        path = os.path.join(out_dir, file)
        np.save(path, value)
        written.append({"name": name, "file": file, "shape": list(value.shape), "dtype": str(value.dtype),
                        "bytes": os.path.getsize(path), "sha256": _sha256(path)})
    return written


def environment() -> dict:
    import numpy as np
    from google.protobuf.internal import api_implementation

    from mace import __version__
    return {"runner": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "machine": platform.machine(), "protobuf": api_implementation.Type(), "cpu": cpu_model(),
            "cores": os.cpu_count() or 0, "numba": _version_of("numba")}


def cpu_model() -> str:
    """The board's CPU as /proc/cpuinfo names it (x86 'model name'; ARM 'Hardware', 'Model' or the
    implementer/part numbers), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = {}
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or ""
    for key in ("model name", "Model", "Hardware", "cpu model"):
        if fields.get(key):
            return fields[key]
    if fields.get("CPU implementer"):
        return f"ARM implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"
    return platform.processor() or ""


def _version_of(package: str) -> str:
    """An installed package's version without importing it ('' when absent): numba's import alone
    takes seconds on a small board."""
    try:
        from importlib.metadata import version
        return version(package)
    except Exception:
        return ""


def unpack_loops() -> dict:
    """Where this Python has numba: the compiled loops out of mace_run.pyz into a folder on disk
    (numba compiles them there once and caches the machine code beside them, for the board's own
    CPU: LLVM's portable code paths on ARM, no x86 intrinsics), that folder added to the __path__
    of their packages, so mace.ops.fast._jit finds them. Returns what happened for the result:
    {"folder": ...} or {"skipped": why}; the fast kernels take their numpy paths where they are
    not unpacked (no numba, MACE_NO_JIT=1, no folder that can be written).

    The folder is ~/.cache/mace_run/loops-<machine>-py<X.Y>-<sha of the loops> (XDG_CACHE_HOME),
    else .mace_run_loops/ beside the archive: the loops of one runner version compile once per
    board, not once per work_dir; another version's loops get a folder of their own."""
    import importlib
    import zipfile
    import zipimport

    if os.environ.get("MACE_NO_JIT", "") not in ("", "0"):
        return {"skipped": "MACE_NO_JIT is set"}
    if not _version_of("numba"):
        return {"skipped": "no numba in this Python"}
    import mace
    loader = getattr(mace, "__loader__", None)
    if not isinstance(loader, zipimport.zipimporter):
        return {"skipped": "the runner is not running from mace_run.pyz (its loops are in place)"}
    with zipfile.ZipFile(loader.archive) as z:
        files = {n[len(LOOPS) + 1:]: z.read(n) for n in sorted(z.namelist())
                 if n.startswith(f"{LOOPS}/") and n.endswith(".py")}
    if not files:
        return {"skipped": "this mace_run.pyz carries no loops"}
    digest = hashlib.sha256()
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    leaf = f"loops-{platform.machine()}-py{sys.version_info[0]}.{sys.version_info[1]}-{digest.hexdigest()[:16]}"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    errors = []
    for parent in (os.path.join(cache, "mace_run"), os.path.join(os.path.dirname(loader.archive), ".mace_run_loops")):
        folder = os.path.join(parent, leaf)
        try:
            if not os.path.isdir(folder):
                _write_tree(parent, folder, files)
            break
        except OSError as e:
            errors.append(f"{parent}: {e.strerror or e}")
    else:
        return {"skipped": "no folder for them could be written (" + "; ".join(errors) + ")"}
    for package in sorted({os.path.dirname(name) for name in files}):   # mace/ops/fast, mace/ops/fast/int8
        module = importlib.import_module(package.replace("/", "."))
        path = os.path.join(folder, package)
        if path not in module.__path__:
            module.__path__.append(path)
    return {"folder": folder}


def _write_tree(parent: str, folder: str, files: dict) -> None:
    """files under folder, whole or not at all: written into a temporary folder, then renamed
    (another run that got there first wins; its files are the same)."""
    import shutil
    import tempfile

    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".unpacking-", dir=parent)
    try:
        for name, data in files.items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        os.rename(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.isdir(folder):
            raise


def jit_target() -> str:
    """The CPU numba compiles for ('cortex-a72', 'generic', 'skylake-avx512'), '' unknown."""
    try:
        from numba.core import config
        import llvmlite.binding as llvm
        return str(config.CPU_NAME or llvm.get_host_cpu_name())
    except Exception:
        return ""


def pin(policy: int, num_threads: int) -> dict:
    """Apply --cpu_affinity_policy once numpy (and so the BLAS threads) is loaded."""
    from mace.runtime.affinity import POLICIES, pin_threads

    info = {"policy": policy, "name": POLICIES[policy], "cores": [], "applied": policy == 0}
    if policy:
        info["cores"] = pin_threads(policy, num_threads)
        info["applied"] = bool(info["cores"])
    return info


def engine_info(opened) -> dict:
    """What the host reports about the engine: the runtime that ran, notes, the OpenCL side."""
    kernels = {}
    for node in getattr(opened.engine, "nodes", []):   # which kernels ran: the numpy references or compiled
        kernels[node.tag] = kernels.get(node.tag, 0) + 1
    from mace.ops.fast._jit import loops
    compiled = loops() is not None
    return {"runtime": opened.runtime, "notes": opened.notes, "fallback": opened.fallback,
            "opencl": opened.opencl, "kernels": kernels, "compiled": compiled,
            "jit_target": jit_target() if compiled else ""}


def benchmark(args, engine, inputs, init_ms: float) -> dict:
    from mace.report.benchmark import benchmark_engine

    r = benchmark_engine(engine, inputs, args.round, args.warmup,
                         model=os.path.splitext(os.path.basename(args.model))[0], runtime=engine.device)
    return {"model": args.model, "timing": {"init_ms": init_ms}, "benchmark": r.to_dict(),
            "environment": environment(), "outputs": []}


def run(args) -> dict:
    from mace.devices.board_engine import open_board_engine
    from mace.runtime.profiler import OpProfiler

    loops = unpack_loops()   # before the first kernel asks mace.ops.fast._jit for them
    inputs = read_inputs(args.input)
    affinity = pin(args.cpu_affinity_policy, args.omp_num_threads)
    restart_inits = []
    for _ in range(max(args.restart_round, 1) - 1):   # MACE's --restart_round: fresh engines first
        opened, init_ms = _timed(lambda: open_board_engine(args))
        opened.engine.run(inputs)
        restart_inits.append(init_ms)
    opened, init_ms = _timed(lambda: open_board_engine(args))
    engine = opened.engine
    if args.benchmark:
        return dict(benchmark(args, engine, inputs, init_ms), affinity=affinity,
                    engine=dict(engine_info(opened), loops=loops))
    outputs, warmup_ms = _timed(lambda: engine.run(inputs))
    profiler = OpProfiler() if args.profile else None
    if profiler:
        engine.observers.append(profiler)
    round_ms = [_timed(lambda: engine.run(inputs))[1] for _ in range(max(args.round, 0))]
    result = {"model": args.model, "timing": dict(timing_stats(init_ms, warmup_ms, round_ms), round_ms=round_ms),
              "environment": environment(), "outputs": [], "affinity": affinity,
              "engine": dict(engine_info(opened), loops=loops),
              "restart_init_ms": restart_inits + [init_ms]}
    if profiler:
        result["op_stats"] = [vars(s) for s in profiler.stats()]
    from mace.runtime.gpu.deploy import range_check_notes
    result["range_notes"] = range_check_notes(engine)   # the last run's fp16 counts, as on the host
    if args.output_dir:
        result["outputs"] = write_outputs(outputs, args.output_dir, args.indexed_outputs)
    return result


def _plain(value):
    """numpy scalars (MAC counts, shapes) as JSON numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    limit_threads(args.omp_num_threads)
    start_watchdog(args.timeout)
    if args.exit_with_parent:
        watch_parent()
    try:
        result = run(args)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "numpy":
            raise
        print(f"error: mace_run.pyz needs numpy on this device, and {sys.executable} has none: install it "
              f"(`{sys.executable} -m pip install numpy`, or the system's python3-numpy package)",
              file=sys.stderr)
        return 1
    except Exception as e:
        from mace.errors import MaceError
        if args.verbose:
            traceback.print_exc()
        known = isinstance(e, MaceError)
        print(f"error: {e}" if known else f"error: internal: {type(e).__name__}: {e}", file=sys.stderr)
        return 1 if known else 3
    text = json.dumps(result, default=_plain)
    path = args.json or (os.path.join(args.output_dir, RESULT_FILE) if args.output_dir else None)
    if path:
        with open(path, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
