"""Real graphs and the kernel each node gets: the snapshot `kernel_choice.json` pins them.

Which kernel takes a node (the engine's tag order and each kernel's `check`), which ops the
quantize pass can quantize and which the GPU takes, on the digits example (float and
quantized) and on one-op graphs chosen to hit both sides of the kernels' checks. The
snapshot was written before the three "can this kernel take this node" methods became one
`check(ctx)`; `tests/runtime/test_kernel_choice.py` holds every later change to it.

    python -m tests.runtime.kernel_choice_cases     # rewrite the snapshot (on purpose only)
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

from mace.config.specs import TensorSpec
from mace.errors import MaceError
from mace.frontends.base import add_input_info, add_output_info
from mace.ir.graph import Graph
from mace.ops.gpu.support import gpu_reason
from mace.quantize.calibrate import collect_ranges
from mace.runtime.engine import Engine
from mace.transform.passes.quantize import quantize_graph, quantize_plan
from mace.transform.shape_inference import infer_shapes
from tests.ops.ir_graph import graph_of

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).with_name("kernel_choice.json")
DIGITS = ROOT / "examples" / "digits" / "digits_cnn.onnx"


def _rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed + len(shape)).uniform(-1.0, 1.0, shape).astype(dtype)


def one_op(op_type, x_shape, consts=None, args=None, inputs=None, x_dtype=None, extra_inputs=None):
    """y = op_type(x, *inputs) with constants `consts` ({name: array}), NHWC args."""
    consts = consts or {}
    names = inputs if inputs is not None else ["x"] + list(consts)
    graph_inputs = {"x": x_shape, **(extra_inputs or {})}
    if x_dtype is None:
        return graph_of(graph_inputs, [(op_type, names, ["y"], dict(args or {}))], consts)
    graph = Graph()   # inputs of another dtype (graph_of's are float32)
    for name, shape in graph_inputs.items():
        add_input_info(graph, TensorSpec(name, tuple(shape), "NONE", np.dtype(x_dtype).name))
    for name, value in consts.items():
        graph.add_const(name, value)
    graph.add_op(op_type, names, ["y"], **dict(args or {}))
    add_output_info(graph, TensorSpec("y", None, "NONE"))
    infer_shapes(graph)
    return graph


def _conv(args=None, w_shape=(6, 4, 3, 3), bias=True, x_shape=(1, 9, 9, 4), op="Conv2D", slope=None):
    consts = {"w": _rand(*w_shape)}
    if bias:
        consts["b"] = _rand(w_shape[0] if op != "DepthwiseConv2d" else w_shape[0])
    if slope is not None:
        consts["s"] = slope
    return one_op(op, x_shape, consts, dict(data_format="NHWC", padding="SAME", **(args or {})))


def float_graphs() -> dict:
    """name -> float graph (shapes inferred)."""
    g = {
        "conv": _conv(),
        "conv_relu6": _conv({"activation": "RELUX", "max_limit": 6.0}),
        "conv_sigmoid": _conv({"activation": "SIGMOID"}),
        "conv_prelu": _conv({"activation": "PRELU"}, slope=_rand(6)),
        "conv_dilation2": _conv({"dilations": [2, 2]}),
        "conv_stride2": _conv({"strides": [2, 2]}),
        "conv_group2": _conv({"group": 2}, w_shape=(6, 2, 3, 3)),
        "conv_no_bias": _conv(bias=False),
        "conv_filter_input": one_op("Conv2D", (1, 9, 9, 4), args=dict(data_format="NHWC", padding="SAME"),
                                    inputs=["x", "w"], extra_inputs={"w": (6, 4, 3, 3)}),
        "depthwise": _conv(w_shape=(4, 1, 3, 3), op="DepthwiseConv2d"),
        "depthwise_m2": _conv(w_shape=(8, 1, 3, 3), op="DepthwiseConv2d"),
        "deconv": one_op("Deconv2D", (1, 5, 5, 4), {"w": _rand(4, 3, 3, 3), "b": _rand(3)},
                         dict(data_format="NHWC", strides=[2, 2], padding="SAME")),
        "fc": one_op("FullyConnected", (2, 8), {"w": _rand(5, 8), "b": _rand(5)}),
        "fc_tanh": one_op("FullyConnected", (2, 8), {"w": _rand(5, 8), "b": _rand(5)}, {"activation": "TANH"}),
        "matmul_const": one_op("MatMul", (3, 6), {"w": _rand(6, 4)}),
        "matmul_inputs": one_op("MatMul", (2, 3, 6), inputs=["x", "w"], extra_inputs={"w": (2, 6, 4)}),
        "matmul_transpose_a": one_op("MatMul", (6, 3), args={"transpose_a": 1}, inputs=["x", "w"],
                                     extra_inputs={"w": (6, 4)}),
        "pool_max": one_op("Pooling", (1, 8, 8, 3), args=dict(data_format="NHWC", pooling_type="MAX",
                                                              kernels=[2, 2], strides=[2, 2], padding="VALID")),
        "pool_avg": one_op("Pooling", (1, 8, 8, 3), args=dict(data_format="NHWC", pooling_type="AVG",
                                                              kernels=[3, 3], strides=[1, 1], padding="SAME")),
        "softmax": one_op("Softmax", (2, 10), args={"axis": -1}),
        "softmax_axis0": one_op("Softmax", (4, 10), args={"axis": 0}),
        "log_softmax": one_op("Softmax", (2, 10), args={"axis": -1, "use_log": 1}),
        "relu": one_op("Activation", (1, 4, 4, 3), args={"activation": "RELU"}),
        "sigmoid": one_op("Activation", (1, 4, 4, 3), args={"activation": "SIGMOID"}),
        "prelu_channel": one_op("Activation", (1, 4, 4, 3), {"s": _rand(3)}, {"activation": "PRELU"}),
        "prelu_full": one_op("Activation", (1, 4, 4, 3), {"s": _rand(4, 4, 3)}, {"activation": "PRELU"}),
        "add_const": one_op("Eltwise", (1, 4, 4, 3), {"c": _rand(3)}, {"type": "SUM"}),
        "mul_inputs": one_op("Eltwise", (1, 4, 4, 3), inputs=["x", "z"], args={"type": "PROD"},
                             extra_inputs={"z": (1, 4, 4, 3)}),
        "pow_inputs": one_op("Eltwise", (1, 4, 4, 3), inputs=["x", "z"], args={"type": "POW"},
                             extra_inputs={"z": (1, 4, 4, 3)}),
        "concat": one_op("Concat", (1, 4, 4, 3), inputs=["x", "z"], args={"axis": 3},
                         extra_inputs={"z": (1, 4, 4, 2)}),
        "concat_int": one_op("Concat", (2, 3), inputs=["x", "z"], args={"axis": 1},
                             extra_inputs={"z": (2, 2)}, x_dtype=np.int32),
        "reshape": one_op("Reshape", (2, 6), args={"dims": [3, 4]}),
        "transpose": one_op("Transpose", (2, 3, 4), args={"dims": [2, 0, 1]}),
        "transpose_int": one_op("Transpose", (2, 3, 4), args={"dims": [2, 0, 1]}, x_dtype=np.int32),
        "reduce_mean": one_op("Reduce", (1, 4, 4, 3), args={"reduce_type": "MEAN", "axis": [1, 2],
                                                            "keepdims": 1}),
        "reduce_max": one_op("Reduce", (1, 4, 4, 3), args={"reduce_type": "MAX", "axis": [1, 2],
                                                           "keepdims": 1}),
        "batch_norm": one_op("BatchNorm", (1, 4, 4, 3), {"s": _rand(3), "o": _rand(3)}),
        "batch_norm_tanh": one_op("BatchNorm", (1, 4, 4, 3), {"s": _rand(3), "o": _rand(3)},
                                  {"activation": "TANH"}),
        "channel_shuffle": one_op("ChannelShuffle", (1, 4, 4, 6), args={"group": 2}),
        "lrn": one_op("LocalResponseNorm", (1, 4, 4, 6), args=dict(data_format="NHWC", size=5,
                                                                   bias=1.0, alpha=1e-4, beta=0.75)),
        "layer_norm": one_op("LayerNorm", (2, 5, 8), {"g": _rand(8), "b": _rand(8)}, {"axis": -1}),
        "layer_norm_axis1": one_op("LayerNorm", (2, 5, 8), {"g": _rand(5, 8), "b": _rand(5, 8)}, {"axis": 1}),
        "resize_bilinear": one_op("ResizeBilinear", (1, 4, 4, 3), args=dict(data_format="NHWC", size=[8, 8], scale=[0.0, 0.0])),
        "pad": one_op("Pad", (1, 4, 4, 3), args=dict(paddings=[0, 0, 1, 1, 2, 2, 0, 0])),
        "pad_reflect_wide": one_op("Pad", (1, 2, 2, 3), args=dict(paddings=[0, 0, 3, 3, 0, 0, 0, 0],
                                                                   pad_type="REFLECT")),
        "reshape_int64": one_op("Reshape", (2, 6), args={"dims": [3, 4]}, x_dtype=np.int64),
        "relu_int": one_op("Eltwise", (2, 6), inputs=["x", "z"], args={"type": "SUM"},
                           extra_inputs={"z": (2, 6)}, x_dtype=np.int32),
        "reduce_int": one_op("Reduce", (2, 6), args={"reduce_type": "SUM", "axis": [1], "keepdims": 0},
                             x_dtype=np.int32),
        "channel_shuffle_bool": one_op("ChannelShuffle", (1, 2, 2, 4), args={"group": 2}, x_dtype=np.bool_),
        "matmul_int": one_op("MatMul", (3, 6), inputs=["x", "w"], extra_inputs={"w": (6, 4)}, x_dtype=np.int32),
        "conv_nchw_dilation2": one_op("Conv2D", (1, 4, 9, 9), {"w": _rand(6, 4, 3, 3), "b": _rand(6)},
                                      dict(data_format="NCHW", padding="SAME", dilations=[2, 2])),
        "chain": graph_of({"x": (1, 8, 8, 4)}, [
            ("Conv2D", ["x", "w1", "b1"], ["c1"], dict(data_format="NHWC", padding="SAME", activation="RELU")),
            ("Activation", ["c1"], ["s"], {"activation": "SIGMOID"}),
            ("Conv2D", ["s", "w2", "b2"], ["c2"], dict(data_format="NHWC", padding="SAME")),
            ("Pooling", ["c2"], ["p"], dict(data_format="NHWC", pooling_type="AVG", kernels=[2, 2],
                                            strides=[2, 2], padding="VALID")),
            ("Softmax", ["p"], ["y"], {"axis": -1})],
            {"w1": _rand(4, 4, 3, 3), "b1": _rand(4), "w2": _rand(5, 4, 3, 3), "b2": _rand(5)}),
    }
    return g


def digits_graph():
    import onnx

    from mace.config.specs import ModelSpec, TensorSpec
    from mace.frontends import convert
    from mace.transform.pipeline import transform
    model = onnx.load(str(DIGITS))
    inp = model.graph.input[0]
    dims = tuple(d.dim_value or 1 for d in inp.type.tensor_type.shape.dim)
    spec = ModelSpec(model_path=str(DIGITS), inputs=[TensorSpec(inp.name, dims, "NONE")],
                     outputs=[TensorSpec(o.name, None, "NONE") for o in model.graph.output])
    graph = convert("onnx", spec)
    transform(graph, {})
    return graph


def quantized(graph, seed: int = 0):
    """The graph quantized on ranges of two random samples (None: nothing to quantize)."""
    rng = np.random.default_rng(seed)
    samples = [{n: rng.uniform(-1.0, 1.0, graph.specs[n][0]).astype(graph.specs[n][1])
                for n in graph.input_names} for _ in range(2)]
    q = copy.deepcopy(graph)
    ranges = collect_ranges(copy.deepcopy(graph), samples)
    quantize_graph(q, {"quantize": True, "quantize_ranges": ranges, "per_channel": True, "runtime": "cpu"})
    return q


def choices(graph, **options) -> list:
    try:
        engine = Engine(copy.deepcopy(graph), options=options)
    except MaceError as e:   # refused at load: that is pinned too
        return [f"error: {e}"]
    return [f"{n.op.name} {n.op.type} {n.tag} {type(n.kernel).__name__}" for n in engine.nodes]


def record(name: str, graph, float_graph: bool) -> dict:
    out = {"engine": choices(graph), "reference": choices(graph, reference_kernels=True),
           "gpu": {op.name: gpu_reason(op, graph) for op in graph.net.op}}
    if float_graph:
        out["quantize_plan"] = quantize_plan(graph)
    return out


QUANTIZED_CASES = ("conv", "conv_relu6", "conv_sigmoid", "depthwise", "depthwise_m2", "fc", "matmul_const",
                   "matmul_inputs", "pool_max", "pool_avg", "softmax", "relu", "sigmoid", "add_const",
                   "mul_inputs", "concat", "reduce_mean", "batch_norm", "resize_bilinear", "pad",
                   "transpose", "reshape", "channel_shuffle", "chain", "deconv", "prelu_channel")


def snapshot() -> dict:
    graphs = float_graphs()
    out = {}
    for name, graph in graphs.items():
        out[name] = record(name, graph, True)
    for name in QUANTIZED_CASES:
        out[f"int8 {name}"] = record(name, quantized(graphs[name]), False)
    digits = digits_graph()
    out["digits"] = record("digits", digits, True)
    out["int8 digits"] = record("digits", quantized(digits), False)
    return out


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
