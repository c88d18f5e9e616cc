#!/usr/bin/env python3
"""Throughput of one batch-4 run against four batch-1 runs, ours and onnxruntime's, for models
converted once with a variable batch (input_shapes: 1..4,...; docs/deployment_file.md).

    python benchmarks/bench_batch.py                       # squeezenet, densenet121; 20 rounds
    python benchmarks/bench_batch.py --models squeezenet --rounds 5

Models: onnx's light architectures (random weights, mace/testing/onnx_models.py) with their
batch made symbolic. One engine serves both batches (engine.run resizes; both plans are kept),
so the batch-1 and batch-4 numbers come from the same converted model. Both runtimes run in
this process with their default threads; rounds interleave the four measurements. Prints a
Markdown table of images per second (median round).
"""
from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mace.config import load_deployment  # noqa: E402
from mace.convert import convert_deployment  # noqa: E402
from mace.runtime.engine import create_engine  # noqa: E402
from mace.testing.onnx_models import data_input, randomized  # noqa: E402
from mace.testing.variable_shape_models import with_symbolic_batch  # noqa: E402


def convert(name: str, work: Path):
    import onnx
    import yaml

    model = with_symbolic_batch(randomized(name))
    inp, shape = data_input(model)
    path = work / f"{name}.onnx"
    onnx.save(model, path)
    sg = {"input_tensors": inp, "input_shapes": "1..4," + ",".join(map(str, shape[1:])),
          "input_data_formats": "NCHW", "output_tensors": model.graph.output[0].name,
          "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg],
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (work / f"{name}.yml").write_text(yaml.safe_dump({"library_name": name, "models": {name: entry}}))
    result = convert_deployment(load_deployment(work / f"{name}.yml"), build_dir=work / "builds")[0]
    return result.pb_path, path, inp, shape


def measure(name: str, rounds: int, work: Path) -> dict:
    import onnxruntime as ort

    pb, onnx_path, inp, shape = convert(name, work)
    engine, session = create_engine(pb), ort.InferenceSession(str(onnx_path))
    x4 = np.random.default_rng(0).uniform(0, 1, [4] + shape[1:]).astype(np.float32)
    x1 = [x4[i:i + 1] for i in range(4)]
    runs = {"ours 4 x batch 1": lambda: [engine.run({inp: x}) for x in x1],
            "ours batch 4": lambda: engine.run({inp: x4}),
            "onnxruntime 4 x batch 1": lambda: [session.run(None, {inp: x}) for x in x1],
            "onnxruntime batch 4": lambda: session.run(None, {inp: x4})}
    for fn in runs.values():   # warm-up: both shapes planned, kernels compiled
        fn()
    times = {k: [] for k in runs}
    for _ in range(rounds):
        for k, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: 4 / statistics.median(v) for k, v in times.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="squeezenet,densenet121")
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = {m: measure(m, args.rounds, Path(tmp)) for m in args.models.split(",")}
    cols = list(next(iter(rows.values())))
    print("| model | " + " | ".join(f"{c} (img/s)" for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for m, r in rows.items():
        print(f"| {m} | " + " | ".join(f"{r[c]:.1f}" for c in cols) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
