#!/usr/bin/env python3
"""Operator benchmark (MACE's "Operator Benchmark"): time, MB/s and GMACPS per op, to find hot spots.

    python benchmarks/bench_ops.py                          # the conv shapes of SHAPES below
    python benchmarks/bench_ops.py --models resnet50,mobilenet_v2 --top 15
    python benchmarks/bench_ops.py --shape 1x56x56x64:64:3x3:s1:p1 --winograd 4

Shape mode builds one-op graphs (Conv2D, or DepthwiseConv2d with `dw`) and times the
fast kernel, the reference kernel (`--reference` too) and the GEMM alone. Model mode
runs a model and times every node in place. MB/s counts the bytes an op must at
least read and write (input, output, weights); GMACPS its multiply-accumulates.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# NHWC input : output channels : kernel : stride : pad [: dw]; ResNet-50 / VGG / MobileNet layers
SHAPES = ["1x224x224x3:64:7x7:s2:p3", "1x56x56x64:64:3x3:s1:p1", "1x28x28x128:128:3x3:s1:p1",
          "1x14x14x256:256:3x3:s1:p1", "1x7x7x512:512:3x3:s1:p1", "1x56x56x64:256:1x1:s1:p0",
          "1x14x14x1024:2048:1x1:s2:p0", "1x224x224x64:64:3x3:s1:p1", "1x112x112x32:32:3x3:s1:p1:dw",
          "1x56x56x144:144:3x3:s1:p1:dw"]


def parse_shape(text: str) -> dict:
    parts = text.split(":")
    n, h, w, c = (int(v) for v in parts[0].split("x"))
    kh, kw = (int(v) for v in parts[2].split("x"))
    return dict(x=(n, h, w, c), o=int(parts[1]), k=(kh, kw), s=int(parts[3][1:]), p=int(parts[4][1:]),
                dw="dw" in parts[5:])


def op_graph(spec: dict, winograd: int):
    from mace.frontends.base import add_input_info, add_output_info
    from mace.config.specs import TensorSpec
    from mace.ir.graph import Graph
    from mace.transform.shape_inference import infer_shapes

    rng = np.random.default_rng(0)
    c = spec["x"][3]
    graph = Graph()
    add_input_info(graph, TensorSpec("x", spec["x"], "NONE"))
    w_shape = (c, 1) + spec["k"] if spec["dw"] else (spec["o"], c) + spec["k"]
    graph.add_const("w", rng.standard_normal(w_shape).astype(np.float32) * 0.1)
    graph.add_const("b", rng.standard_normal(w_shape[0]).astype(np.float32))
    args = dict(data_format="NHWC", strides=[spec["s"]] * 2, pads=[spec["p"]] * 4, activation="RELU")
    if winograd and not spec["dw"]:
        args["winograd"] = winograd
    graph.add_op("DepthwiseConv2d" if spec["dw"] else "Conv2D", ["x", "w", "b"], ["y"], **args)
    add_output_info(graph, TensorSpec("y", None, "NONE"))
    infer_shapes(graph)
    return graph


def macs(node) -> int:
    """Multiply-accumulates of a conv / FC node (0 for the rest)."""
    op, ins, out = node.op.type, node.inputs, node.outputs[0]
    if op == "Conv2D":
        o, cg, kh, kw = ins[1].shape
        return int(out.size) * cg * kh * kw
    if op == "DepthwiseConv2d":
        return int(out.size) * ins[1].shape[2] * ins[1].shape[3]
    if op in ("FullyConnected", "MatMul") and len(ins) > 1:
        return int(out.size) * int(ins[0].shape[-1])
    return 0


def nbytes(node) -> int:
    arrays = list(node.inputs) + list(node.outputs)
    return sum(int(a.nbytes) for a in arrays if isinstance(a, np.ndarray))


def time_node(engine, index: int, runs: int) -> float:
    step = engine._steps[index]
    times = []
    with engine.session():   # as Engine.run calls its steps (the compute pool's threads)
        step()
        for _ in range(runs):
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def time_in_run(engine, runs: int) -> list:
    """Median seconds of every node, timed inside whole runs (caches as a real run leaves them)."""
    steps = engine._steps
    times = [[] for _ in steps]
    with engine.session():
        for _ in range(runs):
            for i, step in enumerate(steps):
                t = time.perf_counter()
                step()
                times[i].append(time.perf_counter() - t)
    return [statistics.median(t) for t in times]


def row(label: str, node, seconds: float) -> str:
    mac, size = macs(node), nbytes(node)
    algo = getattr(node.kernel, "algorithm", "")
    return (f"| {label} | {node.op.type} | {node.tag}{' ' + algo if algo else ''} | "
            f"{list(node.outputs[0].shape)} | {seconds * 1e3:.3f} | {size / seconds / 1e6:.0f} | "
            f"{mac / seconds / 1e9:.1f} |")


HEADER = ("| op | type | kernel | output | time ms | MB/s | GMACPS |\n"
          "|---|---|---|---|---|---|---|")


def shape_mode(args) -> None:
    from mace.runtime.engine import Engine

    print(HEADER)
    for text in args.shape or SHAPES:
        graph = op_graph(parse_shape(text), args.winograd)
        variants = [("fast", {})] + ([("reference", {"reference_kernels": True})] if args.reference else [])
        for label, options in variants:
            engine = Engine(graph, options=options)
            engine.set_inputs({"x": np.random.default_rng(1).standard_normal(graph.specs["x"][0])
                               .astype(np.float32)})
            print(row(f"{text} ({label})", engine.nodes[0], time_node(engine, 0, args.runs)), flush=True)


def model_mode(args) -> None:
    import onnx

    from bench_models import _data_input, light_path, randomize_light
    from mace.onnx_backend import prepare

    for name in args.models.split(","):
        if name == "mobilenet_v2":
            from mace.testing.mobilenet_v2 import mobilenet_v2
            model = mobilenet_v2()
        elif name == "digits":
            model = onnx.load(str(REPO / "examples/digits/digits_cnn.onnx"))
        else:
            model = randomize_light(onnx.load(str(light_path(name))))
        input_name, shape = _data_input(model)
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        engine = prepare(model, {input_name: x}, options={"winograd": args.winograd})
        engine.run({input_name: x})   # every buffer holds real values
        if args.in_run:
            timed = list(zip(time_in_run(engine, args.runs), engine.nodes))
        else:
            timed = [(time_node(engine, n.index, args.runs), n) for n in engine.nodes]
        total = sum(t for t, _ in timed)
        how = "inside whole runs" if args.in_run else "each op on its own"
        print(f"\n## {name}: {total * 1e3:.2f} ms summed over {len(timed)} nodes ({how})\n\n{HEADER}")
        for seconds, node in sorted(timed, key=lambda tn: -tn[0])[:args.top]:
            print(row(node.op.name[:40], node, seconds))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", action="append", help="N x H x W x C:O:KHxKW:sS:pP[:dw] (repeatable)")
    p.add_argument("--models", help="time every node of these bench_cpu models instead")
    p.add_argument("--top", type=int, default=20, help="model mode: slowest nodes shown (20)")
    p.add_argument("--in-run", action="store_true",
                   help="model mode: time each op inside whole runs (default: each op called on its own)")
    p.add_argument("--runs", type=int, default=20, help="timed calls per op (median; 20)")
    p.add_argument("--threads", type=int, default=2, help="BLAS threads (2)")
    p.add_argument("--winograd", type=int, default=0, choices=(0, 2, 4), help="as the .yml key")
    p.add_argument("--reference", action="store_true", help="shape mode: time the reference kernel too")
    args = p.parse_args(argv)
    from mace.runtime.affinity import limit_threads

    limit_threads(args.threads)
    (model_mode if args.models else shape_mode)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
