"""The child side of bench_cpu.py: one engine in its own process, timed on the parent's command.

    python benchmarks/bench_cpu.py --child ENGINE CASE_JSON

ENGINE is `ort`, `ort_int8` (onnxruntime's quantize_static of the model: QOperator,
per-channel, uint8 activations x int8 weights, calibrated on the case's input), `ours`
(with "quantize" in the case: `quantize: 1`, calibrated on the same input) or `build`. An
engine child loads the model, warms up, answers `ready`, then serves one JSON command per
stdin line: {"runs": N} times N runs (after "warm" untimed ones) and answers the timings;
{"finish": true} writes the outputs, answers peak RSS and exits. Keeping the child alive lets the parent interleave short
blocks of both engines (other load on the machine then hits both alike)
without loading a model twice. Answers are stdout lines starting with JSON_MARK.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

JSON_MARK = "BENCH_JSON:"


def answer(obj) -> None:
    print(JSON_MARK + json.dumps(obj), flush=True)


def peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0 / (1024.0 if sys.platform == "darwin" else 1.0)  # macOS reports bytes


def timed(fn, runs: int) -> list:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000.0)
    return times


def load_ort(case: dict, x):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = case["threads"]
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(case["model"], opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    feed = {case["input_name"]: x}
    return (lambda: sess.run(names, feed)), names, {}


def load_ort_int8(case: dict, x):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Samples(CalibrationDataReader):
        def __init__(self):
            self.left = [{case["input_name"]: x}]

        def get_next(self):
            return self.left.pop() if self.left else None

    path = str(Path(case["dir"]) / "model_int8_ort.onnx")
    quantize_static(case["model"], path, Samples(), quant_format=QuantFormat.QOperator, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return load_ort({**case, "model": path}, x)


def load_ours(case: dict, x):
    import onnx

    from mace._blas import blas_report
    from mace.onnx_backend import prepare
    from mace.quantize.calibrate import collect_ranges
    from mace.ops.fast import _pool
    from mace.runtime.affinity import limit_threads

    limit_threads(case["threads"])
    if case.get("wait_policy"):   # the pool is the process's: started here, under this policy
        _pool.process_pool(case["wait_policy"])
    feed = {case["input_name"]: x}
    options = {"winograd": case.get("winograd", 0)}
    if case.get("quantize"):   # `quantize: 1`, calibrated on the input itself (as ort_int8 is)
        options.update(quantize=True, calibrate=lambda graph: collect_ranges(graph, [feed]))
    engine = prepare(onnx.load(case["model"]), feed, options=options)
    names = list(engine.graph.output_names)
    tags = {}
    for node in engine.nodes:
        tags[node.tag] = tags.get(node.tag, 0) + 1
    info = {"arena_bytes": int(engine.plan.arena_size), "lower_bound_bytes": int(engine.plan.lower_bound),
            "scratch_bytes": int(engine.scratch_bytes), "kernel_tags": tags,
            "blas": [f"{lib} {arch}" for lib, arch, _ in blas_report()],
            "coretype_env": os.environ.get("OPENBLAS_CORETYPE", ""),
            "compute_pool": engine.pooled, "wait_policy": wait_started()}
    return (lambda: [v for v in engine.run(feed).values()]), names, info


def wait_started() -> str:
    from mace.util import omp_wait as _wait

    return _wait.started() or "no pool"


def build(case: dict) -> int:
    from bench_models import build_case

    try:
        answer(build_case(case["name"], Path(case["workdir"])))
    except Exception as e:
        answer({"error": f"model preparation failed: {type(e).__name__}: {e}"})
    return 0


def serve(engine: str, case: dict) -> int:
    x = np.load(case["input"])
    t = time.perf_counter()
    try:
        run, names, info = {"ours": load_ours, "ort": load_ort, "ort_int8": load_ort_int8}[engine](case, x)
        for _ in range(case["warmup"]):
            run()
    except Exception as e:
        answer({"error": f"{engine} could not load or run the model: {type(e).__name__}: {e}"})
        return 0
    answer({"ready": True, "load_s": time.perf_counter() - t, **info})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("finish"):
            out_path = Path(case["dir"]) / f"{case['label']}_outputs.npz"
            # Positional keys: ONNX tensor names may contain '/', which npz treats as folders.
            np.savez(out_path, *[np.asarray(o) for o in run()])
            answer({"names": names, "outputs_file": str(out_path), "peak_rss_mb": peak_rss_mb()})
            return 0
        try:
            for _ in range(cmd.get("warm", 0)):   # the block starts with caches / thread pools cold
                run()
            answer({"times_ms": timed(run, cmd["runs"])})
        except Exception as e:
            answer({"error": f"run failed: {type(e).__name__}: {e}"})
            return 0
    return 0


def child_main(engine: str, case_path: str) -> int:
    case = json.loads(Path(case_path).read_text())
    return build(case) if engine == "build" else serve(engine, case)
