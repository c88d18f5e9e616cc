#!/usr/bin/env python3
"""CPU latency of our numpy engine next to onnxruntime, on the same inputs and threads.

    python benchmarks/bench_cpu.py                  # full run, writes docs/performance.md
    python benchmarks/bench_cpu.py --quick          # smoke run: two small models, no file
    python benchmarks/bench_cpu.py --models resnet50,squeezenet --threads 4 --runs 20

Models: the nine ONNX "light" architectures that the onnx package ships (their
constant weights swapped for seeded random ones) and the bundled digits example.
Every engine runs in a fresh child process (this script re-invoked with the
hidden --child flag, answering with one JSON line) so that its peak RSS is its
own and the two engines never share thread pools or caches. See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
# A clean checkout need not be pip-installed: let the children import `mace` from the tree.
sys.path.insert(0, str(REPO))

LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")
ALL_MODELS = LIGHT_MODELS + ("digits",)
QUICK_MODELS = ("digits", "squeezenet")
TARGETS = {"resnet50": 2.0, "squeezenet": 2.0, "inception_v1": 2.0, "vgg19": 2.0}
# (runs, warmup) per model, sized so the full run stays well under 10 minutes on 2 cores.
DEFAULT_RUNS = {"digits": (300, 30), "squeezenet": (100, 5), "shufflenet": (100, 5),
                "inception_v1": (60, 3), "inception_v2": (60, 3), "densenet121": (40, 3),
                "resnet50": (40, 3), "bvlc_alexnet": (40, 3), "zfnet512": (30, 3),
                "vgg19": (12, 2)}
QUICK_RUNS = (3, 1)
REL_TOL = 1e-3          # above this max relative error the row is marked as disagreeing
CHILD_TIMEOUT_S = 900
JSON_MARK = "BENCH_JSON:"
SEED = 0


# ---------------------------------------------------------------- model preparation
def light_path(name: str) -> Path:
    import onnx

    return Path(os.path.dirname(onnx.__file__)) / "backend/test/data/light" / f"light_{name}.onnx"


def _consumers(graph) -> dict:
    users = {}
    for node in graph.node:
        for i, t in enumerate(node.input):
            users.setdefault(t, []).append((node, i))
    return users


def _role(tensor: str, users: dict):
    """(node, input index) that finally uses `tensor`, looking through Unsqueeze/Reshape.

    DenseNet feeds its per-channel scale through Unsqueeze and Inception v1 its
    classifier weight through Reshape; the real consumer decides the value range.
    """
    node, index = users[tensor][0]
    if node.op_type in ("Unsqueeze", "Reshape") and index == 0 and node.output[0] in users:
        return _role(node.output[0], users)
    return node, index


def _gemm_fan_in(node, shape) -> int:
    trans_b = any(a.name == "transB" and a.i for a in node.attribute)
    if len(shape) != 2:
        return int(np.prod(shape[1:]))
    return shape[1] if trans_b else shape[0]


def _random_weight(rng, shape, node, index) -> np.ndarray:
    op = node.op_type
    if (op == "BatchNormalization" and index in (1, 4)) or op == "Mul":
        # scales and variances: positive and near 1 so BatchNorm neither explodes nor divides by ~0
        return rng.uniform(0.8, 1.2, shape)
    if op == "Conv" and index == 1:
        # He scaling keeps activations O(1) through VGG's 16 convs (a flat 0.05 grows ~2x a layer)
        return rng.standard_normal(shape) * np.sqrt(2.0 / max(int(np.prod(shape[1:])), 1))
    if op == "Gemm" and index == 1:
        return rng.standard_normal(shape) * np.sqrt(2.0 / max(_gemm_fan_in(node, shape), 1))
    return rng.standard_normal(shape) * 0.05   # biases, BN means and shifts


def randomize_light(model, seed: int = SEED):
    """Replace ConstantOfShape weights by seeded random initializers; drop them from graph.input."""
    from onnx import numpy_helper

    graph = model.graph
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    users = _consumers(graph)
    rng = np.random.default_rng(seed)
    kept, new_inits = [], []
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            kept.append(node)
            continue
        shape = [int(d) for d in values[node.input[0]].reshape(-1)]
        user, index = _role(node.output[0], users)
        weight = _random_weight(rng, shape, user, index).astype(np.float32)
        new_inits.append(numpy_helper.from_array(weight, node.output[0]))
    used = {t for node in kept for t in node.input}
    inits = [t for t in graph.initializer if t.name in used] + new_inits
    init_names = {t.name for t in inits}
    # The true input is the one graph input that never was an initializer nor a weight.
    data_inputs = [v for v in graph.input if v.name not in values and v.name not in init_names]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(inits)
    del graph.input[:]
    graph.input.extend(data_inputs)
    model.ir_version = max(model.ir_version, 4)  # IR >= 4: initializers need not be inputs
    return model


def expose_logits(model) -> None:
    """Add each Softmax output's input as an extra graph output.

    Several randomized nets end in a saturated (one-hot) softmax, which would hide a wrong
    layer from the error check; the logits do not. Costs one 1000-float copy per run.
    """
    from onnx import TensorProto, helper

    producers = {o: n for n in model.graph.node for o in n.output}
    names = {o.name for o in model.graph.output}
    for out in list(model.graph.output):
        node = producers.get(out.name)
        if node is not None and node.op_type == "Softmax" and node.input[0] not in names:
            model.graph.output.append(
                helper.make_tensor_value_info(node.input[0], TensorProto.FLOAT, None))
            names.add(node.input[0])


def _data_input(model):
    vi = model.graph.input[0]
    return vi.name, [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]


def build_case(name: str, workdir: Path) -> dict:
    """Write the model and its input under workdir; returns what a child needs to run it."""
    import onnx

    if name == "digits":
        model = onnx.load(str(REPO / "examples/digits/digits_cnn.onnx"))
        # A real held-out test image, already NCHW (1,1,8,8) as the .onnx expects.
        x = np.load(REPO / "examples/digits/test_set.npz")["images"][:1].astype(np.float32)
    else:
        model = randomize_light(onnx.load(str(light_path(name))))
        _, shape = _data_input(model)
        x = np.random.default_rng(SEED + 1).standard_normal(shape).astype(np.float32)
    expose_logits(model)
    input_name, _ = _data_input(model)
    case_dir = workdir / name
    case_dir.mkdir(parents=True)
    onnx.save(model, str(case_dir / "model.onnx"))
    np.save(case_dir / "input.npy", x)
    return {"name": name, "dir": str(case_dir), "model": str(case_dir / "model.onnx"),
            "input": str(case_dir / "input.npy"), "input_name": input_name}


# ---------------------------------------------------------------- child side
def peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0 / (1024.0 if sys.platform == "darwin" else 1.0)  # macOS reports bytes


def time_runs(fn, runs: int, warmup: int) -> list:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000.0)
    return times


def run_ort(case: dict, x: np.ndarray) -> dict:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = case["threads"]
    opts.inter_op_num_threads = 1
    t = time.perf_counter()
    try:
        sess = ort.InferenceSession(case["model"], opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        return {"error": f"onnxruntime could not load the model: {type(e).__name__}: {e}"}
    load_s = time.perf_counter() - t
    feed = {case["input_name"]: x}
    names = [o.name for o in sess.get_outputs()]
    times = time_runs(lambda: sess.run(names, feed), case["runs"], case["warmup"])
    return {"times_ms": times, "load_s": load_s, "names": names, "outputs": sess.run(names, feed)}


def run_ours(case: dict, x: np.ndarray) -> dict:
    import onnx
    from threadpoolctl import threadpool_limits

    from mace.onnx_backend import prepare

    t = time.perf_counter()
    try:
        engine = prepare(onnx.load(case["model"]), {case["input_name"]: x})
    except Exception as e:
        return {"error": f"conversion failed: {type(e).__name__}: {e}"}
    load_s = time.perf_counter() - t
    feed = {case["input_name"]: x}
    with threadpool_limits(limits=case["threads"]):
        times = time_runs(lambda: engine.run(feed), case["runs"], case["warmup"])
        result = engine.run(feed)
    names = list(engine.graph.output_names)
    return {"times_ms": times, "load_s": load_s, "names": names,
            "outputs": [result[n] for n in names],
            "arena_bytes": int(engine.plan.arena_size),
            "lower_bound_bytes": int(engine.plan.lower_bound)}


def build_main(case: dict) -> int:
    try:
        res = build_case(case["name"], Path(case["workdir"]))
    except Exception as e:
        res = {"error": f"model preparation failed: {type(e).__name__}: {e}"}
    print(JSON_MARK + json.dumps(res), flush=True)
    return 0


def child_main(engine: str, case_path: str) -> int:
    case = json.loads(Path(case_path).read_text())
    if engine == "build":
        return build_main(case)
    x = np.load(case["input"])
    try:
        res = (run_ours if engine == "ours" else run_ort)(case, x)
    except Exception as e:
        res = {"error": f"run failed: {type(e).__name__}: {e}"}
    outputs = res.pop("outputs", None)
    if outputs is not None:
        # Positional keys: ONNX tensor names may contain '/', which npz treats as folders.
        out_path = Path(case["dir"]) / f"{engine}_outputs.npz"
        np.savez(out_path, *[np.asarray(o) for o in outputs])
        res["outputs_file"] = str(out_path)
    res["peak_rss_mb"] = peak_rss_mb()
    print(JSON_MARK + json.dumps(res), flush=True)
    return 0


# ---------------------------------------------------------------- parent side
def run_child(engine: str, case: dict, case_path: Path) -> dict:
    """Run this script as `--child ENGINE case.json`; returns the child's JSON answer.

    Linux keeps a process's ru_maxrss across fork and exec, so a child starts with the
    parent's RSS as its peak: the parent therefore never loads a model itself (the
    "build" child does) and stays far smaller than any engine child.
    """
    case_path.write_text(json.dumps(case))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", engine, str(case_path)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {CHILD_TIMEOUT_S} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(JSON_MARK):
            return json.loads(line[len(JSON_MARK):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"child exited {proc.returncode}: {tail[0]}"}


def load_outputs(res: dict) -> dict:
    with np.load(res["outputs_file"]) as f:
        return {n: f[f"arr_{i}"] for i, n in enumerate(res["names"])}


def max_rel_error(ours: dict, ref: dict):
    """max over outputs of max|ours - ort| / max|ort|; a string when they cannot be compared."""
    worst = 0.0
    for name, want in ref.items():
        got = ours.get(name)
        if got is None:
            return f"output '{name}' missing"
        if got.shape != want.shape:
            return f"output '{name}' shape {list(got.shape)} != {list(want.shape)}"
        if not (np.all(np.isfinite(got)) and np.all(np.isfinite(want))):
            return f"output '{name}' not finite"
        scale = max(float(np.max(np.abs(want))), 1e-30)
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))) / scale)
    return worst


def measure(name: str, workdir: Path, args) -> dict:
    runs, warmup = QUICK_RUNS if args.quick else DEFAULT_RUNS[name]
    row = {"model": name, "runs": args.runs or runs, "target": TARGETS.get(name)}
    case = run_child("build", {"name": name, "workdir": str(workdir)},
                     workdir / f"{name}_build.json")
    if "error" in case:
        row["error"] = case["error"]
        return row
    case.update(threads=args.threads, runs=row["runs"],
                warmup=args.warmup if args.warmup is not None else warmup)
    case_dir = Path(case["dir"])
    row["ort"] = run_child("ort", case, case_dir / "ort_case.json")
    row["ours"] = run_child("ours", case, case_dir / "ours_case.json")
    errors = [f"{k}: {row[k]['error']}" for k in ("ours", "ort") if "error" in row[k]]
    if errors:
        row["error"] = "; ".join(errors)
        return row
    row["rel_err"] = max_rel_error(load_outputs(row["ours"]), load_outputs(row["ort"]))
    row["ours_ms"] = statistics.median(row["ours"]["times_ms"])
    row["ort_ms"] = statistics.median(row["ort"]["times_ms"])
    row["ratio"] = row["ours_ms"] / row["ort_ms"]
    return row


def status(row: dict) -> str:
    if "error" in row:
        return "FAILED: " + " ".join(row["error"].replace("|", "/").split())[:200]
    if isinstance(row["rel_err"], str):
        return "DISAGREES: " + row["rel_err"]
    if row["rel_err"] > REL_TOL:
        return f"DISAGREES (rel err > {REL_TOL:g})"
    if row["target"] is None:
        return "ok (report only)"
    return "meets target" if row["ratio"] <= row["target"] else "MISSES target"


def spread_table(rows: list) -> str:
    """Min / p10 / median / p90 of each engine: how much the machine disturbed the runs."""
    lines = ["| model | ours min / p10 / median / p90 ms | onnxruntime min / p10 / median / p90 ms "
             "| ours/ort of the minima |", "|---|---|---|---|"]
    for r in rows:
        if "ours_ms" not in r:
            continue
        cells = []
        for engine in ("ours", "ort"):
            q = np.percentile(r[engine]["times_ms"], [0, 10, 50, 90])
            cells.append(" / ".join(f"{v:.2f}" for v in q))
        ratio = min(r["ours"]["times_ms"]) / min(r["ort"]["times_ms"])
        lines.append(f"| {r['model']} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    return "\n".join(lines)


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list) -> str:
    head = ("| model | ours median ms | onnxruntime median ms | ours/ort | target | status "
            "| max rel err | arena MB | lower bound MB "
            "| peak RSS ours MB | peak RSS ort MB | runs |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        ours, ort = r.get("ours", {}), r.get("ort", {})
        err = r.get("rel_err")
        lines.append("| " + " | ".join([
            r["model"], _fmt(r.get("ours_ms"), ".2f"), _fmt(r.get("ort_ms"), ".2f"),
            _fmt(r.get("ratio"), ".2f"), f"<= {r['target']:.1f}" if r["target"] else "report only",
            status(r), err if isinstance(err, str) else _fmt(err, ".1e"),
            _fmt(ours.get("arena_bytes") and ours["arena_bytes"] / 2**20, ".3g"),
            _fmt(ours.get("lower_bound_bytes") and ours["lower_bound_bytes"] / 2**20, ".3g"),
            _fmt(ours.get("peak_rss_mb"), ".0f"), _fmt(ort.get("peak_rss_mb"), ".0f"),
            str(r["runs"])]) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------- report
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    try:
        return " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_info() -> list:
    import onnx
    import onnxruntime
    from threadpoolctl import threadpool_info

    blas = "; ".join(f"{p.get('internal_api')} {p.get('version')} ({p.get('user_api')}, "
                     f"{p.get('threading_layer', '?')}, arch {p.get('architecture', '?')}, "
                     f"{p.get('num_threads')} threads by default)" for p in threadpool_info())
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    return [
        ("date", _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("CPU", cpu_model()),
        ("cores", f"{os.cpu_count()} logical, {affinity} usable by this process"),
        ("OS", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("Python", platform.python_version()),
        ("numpy", np.__version__), ("BLAS (threadpoolctl)", blas or "none found"),
        ("onnxruntime", onnxruntime.__version__), ("onnx", onnx.__version__),
        ("repository", git_revision()),
    ]


def command_line(args) -> str:
    parts = ["python benchmarks/bench_cpu.py"]
    if args.models:
        parts.append(f"--models {args.models}")
    if args.threads != 2:
        parts.append(f"--threads {args.threads}")
    for flag in ("runs", "warmup"):
        if getattr(args, flag) is not None:
            parts.append(f"--{flag} {getattr(args, flag)}")
    if args.quick:
        parts.append("--quick")
    return " ".join(parts)


def markdown(rows: list, args, elapsed_s: float, loads: tuple) -> str:
    failed = [r for r in rows if not status(r).startswith(("ok", "meets", "MISSES"))]
    out = [
        "# CPU performance: our numpy engine vs onnxruntime",
        "",
        "Generated by `benchmarks/bench_cpu.py`; do not edit by hand. "
        "Method and caveats: `benchmarks/README.md`.",
        "",
        "## Machine",
        "",
        *[f"- **{k}**: {v}" for k, v in machine_info()],
        "",
        "## Settings",
        "",
        f"- threads: {args.threads} (onnxruntime: intra_op_num_threads={args.threads}, "
        f"inter_op_num_threads=1, CPUExecutionProvider; ours: "
        f"threadpoolctl.threadpool_limits({args.threads}) around the runs)",
        "- batch 1, float32; the same input array for both engines; latency = median wall time "
        "of `Engine.run` / `InferenceSession.run` after warm-up runs",
        f"- light models: constant weights replaced by random ones (seed {SEED}), "
        "input standard normal; digits: first held-out test image",
        f"- whole run took {elapsed_s:.0f} s; load average (1 / 5 / 15 min) {loads[0]} at the "
        f"start, {loads[1]} at the end (other work on the machine shows up here and as "
        "spread below)",
        "",
        "## Results",
        "",
        table(rows),
        "",
        "Columns: *ours/ort* is the latency ratio (lower is better); *target* applies to "
        "ResNet-50, SqueezeNet, Inception v1 and VGG-19, the rest are report only; "
        "*max rel err* is max|ours - ort| / max|ort| over all outputs, the pre-softmax "
        f"logits included (a row over {REL_TOL:g} is marked as disagreeing); *arena MB* is "
        "our memory plan's arena and *lower bound MB* the largest total size of "
        "simultaneously live tensors (no plan can be smaller); *peak RSS* is each engine's "
        "own process, loading the .onnx and building the engine included.",
        "",
        "### Spread of the timed runs",
        "",
        "A wide p10..p90 range means other load on the machine disturbed the runs; the "
        "minima are the least disturbed runs and their ratio the least noisy comparison.",
        "",
        spread_table(rows),
        "",
    ]
    if failed:
        out += ["## Failures", "", *[f"- **{r['model']}**: {status(r)}" for r in failed], ""]
    out += ["## How to reproduce", "", f"`{command_line(args)}` from the repository root "
            "(with the project's dependencies installed).", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="CPU threads for both engines (2)")
    p.add_argument("--runs", type=int, help="timed runs per engine (default: per model)")
    p.add_argument("--warmup", type=int, help="untimed runs first (default: per model)")
    p.add_argument("--models", help=f"comma-separated subset of: {','.join(ALL_MODELS)}")
    p.add_argument("--out", help="markdown file to write (default docs/performance.md; "
                                 "--quick writes none unless given)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {','.join(QUICK_MODELS)}, {QUICK_RUNS[0]} runs")
    p.add_argument("--child", nargs=2, metavar=("ENGINE", "CASE_JSON"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads < 1 or (args.runs is not None and args.runs < 1) \
            or (args.warmup is not None and args.warmup < 0):
        p.error("--threads and --runs must be >= 1, --warmup >= 0")
    return p, args


def selected_models(parser, args) -> list:
    if not args.models:
        return list(QUICK_MODELS if args.quick else ALL_MODELS)
    names = [m.strip().removeprefix("light_") for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in ALL_MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {','.join(ALL_MODELS)}")
    return names


def main(argv=None) -> int:
    parser, args = parse_args(argv)
    if args.child:
        return child_main(*args.child)
    models = selected_models(parser, args)
    out = args.out or (None if args.quick else str(REPO / "docs" / "performance.md"))
    load_start = load_average()
    if hasattr(os, "getloadavg") and os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        # Contention matters a lot: BLAS threads that wait on a busy core stall every GEMM.
        print(f"warning: the machine is busy (load average {load_start}); "
              "timings will be noisy", file=sys.stderr)
    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mace-bench-") as tmp:
        for name in models:
            t = time.perf_counter()
            rows.append(measure(name, Path(tmp), args))
            print(f"{name}: {status(rows[-1])} ({time.perf_counter() - t:.0f} s)", flush=True)
    elapsed = time.perf_counter() - start
    print()
    print(table(rows))
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(markdown(rows, args, elapsed, (load_start, load_average())))
        print(f"\nwrote {out}")
    # Timing misses do not fail the run (they depend on the machine); broken models do.
    return 1 if any(status(r).startswith(("FAILED", "DISAGREES")) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
