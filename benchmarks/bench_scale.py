"""Accuracy-evaluation throughput in process and on Ray with 1 and 2 workers (issue 21).

    python benchmarks/bench_scale.py [--samples 192] [--model squeezenet]

A MACE-style accuracy script (preprocess: seeded random images; postprocess: an argmax
histogram) over one of onnx's shipped architectures with random weights, so the per-sample
model cost dominates (SqueezeNet: ~4 ms a sample on one core). Each configuration runs the same
samples through mace.scale.accuracy.evaluate after one untimed warm-up run (numba compiles
and caches its loops); Ray's start-up (the embedded local cluster) is timed apart from the
evaluation. Prints a table and writes it as Markdown with --markdown FILE.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import onnx
import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mace.config import load_deployment  # noqa: E402
from mace.convert import convert_deployment  # noqa: E402
from mace.scale.accuracy import evaluate  # noqa: E402
from mace.scale.runner import make_cluster, session  # noqa: E402
from mace.testing.onnx_models import data_input, randomized  # noqa: E402

SCRIPT = '''
import numpy as np

class AccuracyValidator:
    def __init__(self, **kwargs):
        self.hist = {{}}

    def sample_size(self):
        return {samples}

    def batch_size(self):
        return 1

    def preprocess(self, start, end):
        rng = np.random.default_rng(start)
        return {{{input!r}: rng.uniform(0, 1, {shape}).astype(np.float32)}}

    def postprocess(self, start, end, outputs):
        top = int(np.argmax(next(iter(outputs.values()))))
        self.hist[top] = self.hist.get(top, 0) + 1

    def result(self):
        return max(self.hist.values()) / {samples}
'''


def build(work: Path, model_name: str, samples: int):
    model = randomized(model_name, seed=1)
    path = work / f"{model_name}.onnx"
    onnx.save(model, str(path))
    name, shape = data_input(model)
    (work / "validator.py").write_text(SCRIPT.format(samples=samples, input=name, shape=list(shape)))
    from mace.config.fetch import sha256_of
    deployment = {"library_name": "scale_bench", "target_abis": ["host"], "models": {model_name: {
        "platform": "onnx", "model_file_path": str(path), "model_sha256_checksum": sha256_of(path),
        "runtime": "cpu", "subgraphs": [{"input_tensors": name, "input_shapes": ",".join(map(str, shape)),
                                         "input_data_formats": "NCHW", "output_tensors": model.graph.output[0].name,
                                         "output_data_formats": "NONE"}]}}}
    yml = work / "deploy.yml"
    yml.write_text(yaml.safe_dump(deployment, sort_keys=False))
    config = load_deployment(yml)
    convert_deployment(config, work / "builds")
    return config, config.models[model_name]


def measure(config, model, work: Path, kind: str, workers: int, threads: int) -> dict:
    cluster = make_cluster(kind, None, workers)
    t0 = time.perf_counter()
    with session(cluster):
        started = time.perf_counter()
        run = evaluate(config, model, work / "builds", work / "validator.py", "bench", cluster,
                       num_threads=threads, resume=False)
        done = time.perf_counter()
    return {"how": f"{kind}" + (f", {workers} worker(s)" if kind == "ray" else ""),
            "start_s": started - t0, "eval_s": done - started,
            "samples_per_s": run.result.samples / (done - started), "result": run.result.result}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=192)
    p.add_argument("--model", default="squeezenet")
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    console = Console()
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        work = Path(tmp)
        config, model = build(work, args.model, args.samples)
        measure(config, model, work, "local", 1, 1)   # warm-up: numba compiles (and caches) its loops once
        rows = [measure(config, model, work, "local", 1, 2),      # in process: both cores to BLAS
                measure(config, model, work, "local", 1, 1),
                measure(config, model, work, "ray", 1, 1),
                measure(config, model, work, "ray", 2, 1)]
    table = Table(title=f"accuracy evaluation, {args.model}, {args.samples} samples")
    for c in ("how", "threads/worker", "start (s)", "evaluation (s)", "samples/s", "result"):
        table.add_column(c)
    threads = ["2", "1", "1", "1"]
    for r, t in zip(rows, threads):
        table.add_row(r["how"], t, f"{r['start_s']:.1f}", f"{r['eval_s']:.2f}", f"{r['samples_per_s']:.1f}",
                      f"{r['result']:.4f}")
    console.print(table)
    same = len({r["result"] for r in rows}) == 1
    console.print(f"results identical across configurations: {same}")
    if args.markdown:
        lines = ["| how | threads/worker | start (s) | evaluation (s) | samples/s |", "|---|---|---|---|---|"]
        lines += [f"| {r['how']} | {t} | {r['start_s']:.1f} | {r['eval_s']:.2f} | {r['samples_per_s']:.1f} |"
                  for r, t in zip(rows, threads)]
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
