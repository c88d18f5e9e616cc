"""Quantize a small hand-built float graph and run it both ways (tests of int8 kernels).

    g = make_graph((1, 8, 8, 3), [("Conv2D", ["x", "w", "b"], ["y"], {...})], consts)
    ref, out, qgraph = quantize_and_run(g, {"x": x})
    assert within_steps(ref["y"], out["y"], output_step(qgraph, "y"), steps=1)

Ranges are calibrated on the same inputs (the float graph's own min/max), so the only
error left is the quantization itself: what the kernels' bounds are about.
"""
from __future__ import annotations

import copy

import numpy as np

from mace.quantize.calibrate import collect_ranges
from mace.runtime.engine import Engine
from mace.transform.passes.quantize import quantize_graph


def quantize_and_run(graph, inputs: dict, ranges: dict | None = None, per_channel: bool = True,
                     device: str = "cpu", runtime: str = "cpu"):
    """(float outputs, quantized outputs, quantized graph). `graph` is left as it was."""
    float_graph = copy.deepcopy(graph)
    ref = Engine(float_graph).run(inputs)
    qgraph = copy.deepcopy(graph)
    ranges = collect_ranges(float_graph, [inputs]) if ranges is None else ranges
    quantize_graph(qgraph, {"quantize": True, "quantize_ranges": ranges,
                            "per_channel": per_channel, "runtime": runtime})
    out = Engine(qgraph, device=device).run(inputs)
    return ref, out, qgraph


def output_step(qgraph, name: str) -> float:
    """The quantization step (scale) of graph output `name` (its Dequantize's input)."""
    for op in qgraph.net.op:
        if op.type == "Dequantize" and op.output[0] == name:
            return qgraph.quant_params(op.input[0]).scale
    raise KeyError(f"output {name} is not dequantized: was its producer quantized?")


def kernel_tags(qgraph, device: str = "cpu") -> dict:
    """op type -> kernel tag chosen by the engine (to assert the int8 kernel really ran)."""
    return {n.op.type: n.tag for n in Engine(qgraph, device=device).nodes}


def within_steps(ref, out, step: float, steps: float = 1.0) -> bool:
    err = np.max(np.abs(np.asarray(ref, np.float64) - np.asarray(out, np.float64)), initial=0.0)
    return bool(err <= steps * step + 1e-6)


def assert_grid_close(got, want, step: float, share: float = 0.02, what: str = "") -> None:
    """Values on a quantization grid that another framework computed with float arithmetic
    (requantization, lookup tables, a float conv before a QuantizeLinear), in kernels it picks per
    CPU (onnxruntime's MLAS: SSE, AVX2, AVX-512, VNNI): the same as ours on this machine, but a value
    at a rounding tie may land one step away on another. At most one `step` anywhere, on at most
    `share` of the values (one value of a small tensor)."""
    diff = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)) / step
    off = int(np.count_nonzero(diff > 1e-3))
    assert diff.max(initial=0.0) <= 1.001 and off <= max(1, share * diff.size), \
        f"{what}: {off} of {diff.size} values off the framework's, by up to {diff.max(initial=0.0):.3f} steps"


def kernel_alone(op_type: str, args: dict, xs, in_params, out_params, tag: str = "int8"):
    """(kernel, output) of op_type's `tag` kernel run alone on uint8 arrays xs with
    hand-picked quantization parameters (no graph, no calibration)."""
    from mace.ir.graph import Graph
    from mace.ops.registry import InferContext, KernelContext, spec

    op = Graph().make_op(op_type, [f"in{i}" for i in range(len(xs))], ["out"], **args)
    shapes = [tuple(x.shape) for x in xs]
    dtypes = [np.dtype(np.uint8)] * len(xs)
    (shape, _), = spec(op_type).infer(InferContext(op, shapes, dtypes, [None] * len(xs)))
    ctx = KernelContext(op, shapes, dtypes, [shape], [np.dtype(np.uint8)], [None] * len(xs),
                        input_quant=list(in_params), output_quant=[out_params])
    cls = spec(op_type).kernels[tag]
    assert cls.check(ctx) is None
    kernel, out = cls(ctx), np.empty(shape, np.uint8)
    kernel.run([np.asarray(x, np.uint8) for x in xs], [out])
    return kernel, out

