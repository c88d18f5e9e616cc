"""Fused activations that are no clamp (HARDSWISH, SIGMOID, TANH, SWISH, LEAKYRELU, ELU,
HARDSIGMOID) on the int8 conv / depthwise / FC kernels (issue 33): the accumulator is
requantized to the op's pre-activation grid (its arg pre_activation_range) and one 256-entry
table maps each code to the output's grid. The fast kernels (int8:fast) give the reference's
bytes; the table is onnxruntime's DequantizeLinear -> op -> QuantizeLinear on every code; a
QDQ model's conv + HardSwish runs int8 with the pair's range between them.
"""
from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest

from mace.ir.args import get_arg
from mace.ir.quant_params import activation_params
from mace.ops.fast.int8 import _qjit
from mace.ops.int8._base import PRE_ACTIVATION_ARG, TABLE_ACTIVATIONS, activation_table
from mace.quantize.calibrate import collect_ranges
from mace.runtime.engine import Engine
from mace.transform.passes.quantize import quantize_graph
from tests.ops.ir_graph import make_graph
from tests.quantize.test_int8_fast import assert_same_bytes, one_signed

ALPHA = {"LEAKYRELU": 0.1, "ELU": 1.0, "HARDSIGMOID": 0.2, "SWISH": 1.0}
LIMIT = {"HARDSIGMOID": 0.5}


def table_graph(op_type, x, consts, args, act, pre=None, out=None):
    """op_type with `act` fused, quantized on calibrated ranges; the pre-activation range is the
    op's output range without the activation (or `pre`), the output's its own (or `out`)."""
    inputs = ["x"] + [name for name in ("w", "b") if name in consts]
    bare = make_graph(x.shape, [(op_type, inputs, ["y"], dict(args))], consts)
    pre = pre or collect_ranges(copy.deepcopy(bare), [{"x": x}])["y"]
    args = dict(args, activation=act, activation_coefficient=ALPHA.get(act, 0.0),
                max_limit=LIMIT.get(act, 0.0), **{PRE_ACTIVATION_ARG: [float(pre[0]), float(pre[1])]})
    graph = make_graph(x.shape, [(op_type, inputs, ["y"], args)], consts)
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    if out is not None:
        ranges["y"] = out
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "per_channel": True,
                           "runtime": "cpu"})
    return graph


def test_the_table_is_dequantize_activation_quantize_on_every_code():
    p_in, p_out = activation_params(-6.0, 4.0), activation_params(-0.375, 4.0)
    x = (np.arange(256, dtype=np.float32) - np.float32(p_in.zero_point)) * np.float32(p_in.scale)
    y = x * np.clip(x / np.float32(6) + np.float32(0.5), 0, 1)   # ONNX HardSwish
    want = np.clip(np.rint(y / np.float32(p_out.scale)) + p_out.zero_point, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(activation_table("HARDSWISH", p_in, p_out), want)
    # saturation at both ends, and a monotone sigmoid table
    sig = activation_table("SIGMOID", activation_params(-20.0, 20.0), activation_params(0.0, 1.0))
    assert sig[0] == 0 and sig[-1] == 255 and np.all(np.diff(sig.astype(int)) >= 0)


def test_a_table_activation_without_a_pre_activation_range_stays_float():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 5, 5, 3)).astype(np.float32)
    consts = {"w": rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)}
    graph = make_graph(x.shape, [("Conv2D", ["x", "w"], ["y"], {"padding": "SAME", "activation": "HARDSWISH"})],
                       consts)
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    from mace.transform.passes.quantize import quantize_plan
    (why,) = quantize_plan(graph).values()
    assert "HARDSWISH needs the range before it" in why
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    conv = next(op for op in graph.net.op if op.type == "Conv2D")
    assert graph.dtype(conv.output[0]).kind == "f"


needs_loops = pytest.mark.skipif(_qjit.qloops() is None, reason="numba is not installed: no int8:fast kernels")

# (pre-activation range, output range) edge cases: calibrated; pre all >= 0 (zero point 0);
# pre all <= 0 (zero point 255); an output range narrower than the activation's (saturation)
EDGES = {"calibrated": (None, None), "pre_zero_point_0": ((0.0, 3.0), None),
         "pre_zero_point_255": ((-3.0, 0.0), None), "saturating_output": (None, (-0.1, 0.3))}


@needs_loops
@pytest.mark.parametrize("edge", EDGES)
@pytest.mark.parametrize("act", TABLE_ACTIVATIONS)
def test_conv2d_table_activation_fast_equals_reference(act, edge):
    pre, out = EDGES[edge]
    rng = np.random.default_rng(len(act) * 10 + len(edge))
    x = one_signed(rng, (1, 7, 6, 5), 0)
    consts = {"w": rng.uniform(-1, 1, (9, 5, 3, 3)).astype(np.float32),
              "b": rng.uniform(-1, 1, 9).astype(np.float32)}
    graph = table_graph("Conv2D", x, consts, {"padding": "SAME"}, act, pre, out)
    conv = next(op for op in graph.net.op if op.type == "Conv2D")
    assert get_arg(conv, "activation") == act and get_arg(conv, PRE_ACTIVATION_ARG)
    assert_same_bytes(graph, x, "Conv2D")


@needs_loops
@pytest.mark.parametrize("shape,w_shape,args", [
    ((1, 6, 6, 8), (8, 8, 1, 1), {}),                                      # pointwise
    ((1, 6, 6, 8), (16, 2, 1, 1), {"group": 4}),                            # grouped 1x1: column runs
    ((2, 7, 5, 3), (5, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]})])
def test_conv2d_hardswish_every_gemm_path_fast_equals_reference(shape, w_shape, args):
    rng = np.random.default_rng(shape[-1] + w_shape[0])
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    consts = {"w": rng.uniform(-1, 1, w_shape).astype(np.float32),
              "b": rng.uniform(-1, 1, w_shape[0]).astype(np.float32)}
    assert_same_bytes(table_graph("Conv2D", x, consts, args, "HARDSWISH"), x, "Conv2D")


@needs_loops
@pytest.mark.parametrize("edge", EDGES)
@pytest.mark.parametrize("act", TABLE_ACTIVATIONS)
@pytest.mark.parametrize("channels", [16, 64, 72], ids=["c16", "c64", "c72"])
def test_depthwise_table_activation_fast_equals_reference(act, edge, channels):
    pre, out = EDGES[edge]
    rng = np.random.default_rng(channels + len(act) + len(edge))
    x = rng.uniform(-1, 1, (1, 7, 7, channels)).astype(np.float32)
    consts = {"w": rng.uniform(-1, 1, (channels, 1, 3, 3)).astype(np.float32),
              "b": rng.uniform(-1, 1, channels).astype(np.float32)}
    graph = table_graph("DepthwiseConv2d", x, consts, {"padding": "SAME"}, act, pre, out)
    assert_same_bytes(graph, x, "DepthwiseConv2d")


@needs_loops
@pytest.mark.parametrize("edge", EDGES)
@pytest.mark.parametrize("act", TABLE_ACTIVATIONS)
def test_fully_connected_table_activation_fast_equals_reference(act, edge):
    pre, out = EDGES[edge]
    rng = np.random.default_rng(len(act) + 3 * len(edge))
    x = rng.uniform(-1, 1, (3, 37)).astype(np.float32)
    consts = {"w": rng.uniform(-1, 1, (33, 37)).astype(np.float32),
              "b": rng.uniform(-1, 1, 33).astype(np.float32)}
    assert_same_bytes(table_graph("FullyConnected", x, consts, {}, act, pre, out), x, "FullyConnected")


def test_a_converted_model_without_the_arg_still_loads_and_runs():
    """Older converted models: a fused RELU quantized as before (no pre_activation_range)."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (1, 5, 5, 3)).astype(np.float32)
    graph = make_graph(x.shape, [("Conv2D", ["x", "w"], ["y"], {"padding": "SAME", "activation": "RELU"})],
                       {"w": rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)})
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    conv = next(op for op in graph.net.op if op.type == "Conv2D")
    assert get_arg(conv, PRE_ACTIVATION_ARG, None) is None
    Engine(graph).run({"x": x})


# ---- the fast int8 Eltwise on broadcast operands (an SE block's scale, a scalar) -------------

BROADCASTS = {"channel_vector": ((1, 7, 7, 512), (1, 1, 1, 512)),
              "vector_first": ((1, 1, 1, 40), (1, 3, 5, 40)),
              "scalar": ((1, 1, 1, 1280), (1, 1, 1, 1)),
              "lower_rank_vector": ((2, 3, 65), (65,)),
              "both_expand": ((1, 4, 1, 6), (1, 1, 5, 6))}


@needs_loops
@pytest.mark.parametrize("kind,act,scales,zeros", [
    ("PROD", "", (0.02, 0.004, 0.01), (128, 0, 60)),            # the pair table
    ("SUM", "RELU", (0.02, 0.05, 0.07), (0, 255, 40)),          # add2
    ("SUB", "", (0.02, 0.021, 0.003), (255, 0, 128)),           # add2, saturating
    ("MAX", "RELUX", (0.5, 0.25, 0.05), (3, 250, 0)),           # rescale tables
])
@pytest.mark.parametrize("case", BROADCASTS)
def test_eltwise_broadcast_fast_equals_reference(case, kind, act, scales, zeros):
    from mace.ir.quant_params import QuantParams
    from tests.quantize.qcase import kernel_alone

    rng = np.random.default_rng(len(case) + len(kind))
    params = [QuantParams(float(np.float32(s)), z) for s, z in zip(scales, zeros)]
    xs = [rng.integers(0, 256, shape).astype(np.uint8) for shape in BROADCASTS[case]]
    xs[0].reshape(-1)[:2], xs[1].reshape(-1)[:1] = (0, 255)[:xs[0].size], 255
    args = {"type": kind, "activation": act, "max_limit": 0.7}
    fast, got = kernel_alone("Eltwise", args, xs, params[:2], params[2], tag="int8:fast")
    _, want = kernel_alone("Eltwise", args, xs, params[:2], params[2])
    assert any(fast.expand)
    np.testing.assert_array_equal(got, want)


@needs_loops
def test_an_se_block_mul_runs_on_the_fast_eltwise():
    """[1, H, W, C] * sigmoid(conv(mean)) [1, 1, 1, C] quantized: int8:fast, the reference's bytes."""
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (1, 7, 7, 24)).astype(np.float32)
    ops = [("Reduce", ["x"], ["m"], {"reduce_type": "MEAN", "axis": [1, 2], "keepdims": 1}),
           ("Conv2D", ["m", "w"], ["s"], {"activation": "RELU"}),
           ("Eltwise", ["x", "s"], ["y"], {"type": "PROD"})]
    graph = make_graph(x.shape, ops, {"w": rng.uniform(-1, 1, (24, 24, 1, 1)).astype(np.float32)})
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    assert_same_bytes(graph, x, "Eltwise")


@needs_loops
@pytest.mark.parametrize("kind,shape", [("PROD", (1, 1, 1, 1)), ("SUM", (1, 1, 1, 6)), ("MAX", (1, 5, 4, 6)),
                                        ("SUB", (6,))])
def test_eltwise_with_a_constant_operand_runs_fast(kind, shape):
    """A constant scalar, per-channel vector or full tensor (Paddle2ONNX's `x * 0.1667`): its
    codes expanded once at load; the reference's bytes."""
    rng = np.random.default_rng(len(kind))
    x = rng.uniform(-1, 1, (1, 5, 4, 3)).astype(np.float32)
    ops = [("Conv2D", ["x", "w"], ["c"], {"padding": "SAME"}),
           ("Eltwise", ["c", "k"], ["y"], {"type": kind})]
    consts = {"w": rng.uniform(-1, 1, (6, 3, 3, 3)).astype(np.float32),
              "k": rng.uniform(-2, 1, shape).astype(np.float32)}
    graph = make_graph(x.shape, ops, consts)
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    assert_same_bytes(graph, x, "Eltwise")


# ---- a QDQ MobileNetV3-like model from onnxruntime: its convs with HardSwish run int8 --------

def v3_like(size: int = 32, classes: int = 10, seed: int = 0):
    """A small MobileNetV3-like ONNX model: conv + BN + HardSwish, depthwise + HardSwish, an SE
    block (mean, 1x1 + Relu, 1x1 + HardSigmoid, Mul by the channel vector), a pointwise
    projection, a classifier with a Sigmoid."""
    from onnx import TensorProto, helper

    from mace.testing.mobilenet_v2 import _Builder

    b = _Builder(seed)

    def cbn(x, cin, cout, k, s, group=1, act="HardSwish"):
        y = b.conv_bn(x, cin, cout, k, s, group=group, relu6=False)
        return b.node(act, [y]) if act else y
    x = cbn("input", 3, 16, 3, 2)
    y = cbn(x, 16, 16, 3, 1, group=16)
    s = b.node("GlobalAveragePool", [y])
    s = cbn(cbn(s, 16, 8, 1, 1, act="Relu"), 8, 16, 1, 1, act=None)
    y = b.node("Mul", [y, b.node("HardSigmoid", [s], alpha=1.0 / 6, beta=0.5)])
    y = cbn(y, 16, 24, 1, 1, act=None)
    y = cbn(cbn(y, 24, 72, 1, 1), 72, 72, 3, 2, group=72)
    y = cbn(cbn(y, 72, 32, 1, 1, act=None), 32, 96, 1, 1)
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y])], axis=1)
    w = b.rng.standard_normal((classes, 96)) * np.sqrt(1.0 / 96)
    y = b.node("Sigmoid", [b.node("Gemm", [y, b.const("fc_w", w), b.const("fc_b", np.zeros(classes))], transB=1)])
    graph = helper.make_graph(b.nodes, "v3_like",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, classes])],
                              initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("qoperator", [False, True], ids=["qdq", "qoperator"])
def test_a_qdq_mobilenet_v3_runs_its_hardswish_convs_int8(tmp_path, qoperator):
    """QDQ: the pair between each Conv and its HardSwish gives the pre-activation range;
    QOperator: the QLinearConv's output grid does."""
    from mace.ir.model_io import load_net
    from mace.runtime.engine import create_engine
    from mace.testing.quant_models import qdq_model, uniform_samples
    from tests.quantize.test_qat import convert_and_validate, model_entry

    size, model = 32, v3_like()
    onnx.save(model, str(tmp_path / "float.onnx"))
    out = model.graph.output[0].name
    samples = [s.transpose(0, 3, 1, 2).copy() for s in uniform_samples((1, size, size, 3), 8, seed=1)]
    qdq_model(tmp_path / "float.onnx", tmp_path / "qdq.onnx", "input", samples, qoperator=qoperator)
    data = (tmp_path / "qdq.onnx").read_bytes()
    report = convert_and_validate(tmp_path, {"qdq": model_entry("onnx", "qdq.onnx", data, size, [out])})
    (metric,) = report["qdq"]["validation"]   # against onnxruntime running the QDQ model
    assert metric["passed"] and metric["cosine"] >= 0.98, metric

    pb = tmp_path / "out" / "qat" / "model" / "qdq.pb"
    net = load_net(pb)
    tables = [op for op in net.op if get_arg(op, "activation", "") in TABLE_ACTIVATIONS
              and op.type in ("Conv2D", "DepthwiseConv2d", "FullyConnected")]
    assert {get_arg(op, "activation") for op in tables} >= {"HARDSWISH", "SIGMOID"}
    assert all(len(get_arg(op, PRE_ACTIVATION_ARG)) == 2 for op in tables)
    engine = create_engine(pb, pb.with_suffix(".data"))
    tags = {n.op.name: (n.op.type, n.tag) for n in engine.nodes}
    weighted = [v for v in tags.values() if v[0] in ("Conv2D", "DepthwiseConv2d", "FullyConnected")]
    assert len(weighted) == 10 and all(tag.startswith("int8") for _, tag in weighted), weighted
    # nothing float but the output's Dequantize and the input's Quantize
    assert [t for t, tag in tags.values() if not tag.startswith("int8")] == [], tags
    assert sum(t == "Dequantize" for t, _ in tags.values()) == 1


def test_calibration_gives_the_range_before_a_fused_table_activation():
    """A float model calibrated at convert: the quantize pass calibrates a copy whose table
    activations are separate ops, so each conv gets its pre-activation range and runs int8."""
    rng = np.random.default_rng(8)
    x = rng.uniform(-1, 1, (1, 8, 8, 3)).astype(np.float32)
    ops = [("Conv2D", ["x", "w1"], ["a"], {"padding": "SAME", "activation": "HARDSWISH"}),
           ("DepthwiseConv2d", ["a", "w2"], ["b"], {"padding": "SAME", "activation": "SIGMOID"}),
           ("Conv2D", ["b", "w3"], ["y"], {"activation": "TANH"})]
    consts = {"w1": rng.uniform(-1, 1, (8, 3, 3, 3)).astype(np.float32),
              "w2": rng.uniform(-1, 1, (8, 1, 3, 3)).astype(np.float32),
              "w3": rng.uniform(-1, 1, (4, 8, 1, 1)).astype(np.float32)}
    graph = make_graph(x.shape, ops, consts)
    want = Engine(copy.deepcopy(graph)).run({"x": x})["y"]
    samples = [{"x": x}]
    quantize_graph(graph, {"quantize": True, "runtime": "cpu",
                           "calibrate": lambda g: collect_ranges(g, samples)})
    convs = [op for op in graph.net.op if op.type in ("Conv2D", "DepthwiseConv2d")]
    assert len(convs) == 3 and all(len(get_arg(op, PRE_ACTIVATION_ARG)) == 2 for op in convs)
    bare = make_graph(x.shape, [(t, i, o, {k: v for k, v in a.items() if k != "activation"})
                                for t, i, o, a in ops[:1]], consts, outputs=("a",))
    pre = collect_ranges(bare, samples)["a"]
    assert get_arg(convs[0], PRE_ACTIVATION_ARG) == pytest.approx(list(pre))
    engine = Engine(graph)
    assert {n.op.type: n.tag for n in engine.nodes}["Conv2D"].startswith("int8")
    got = engine.run({"x": x})["y"]
    cos = float(np.dot(got.ravel(), want.ravel()) / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos > 0.995, cos


@pytest.mark.parametrize("op_type,w_shape,args", [
    ("Deconv2D", (4, 5, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "activation": "HARDSWISH"}),
    ("FullyConnected", (6, 48), {"activation": "SIGMOID"}),
])
def test_every_weighted_int8_kernel_takes_a_table_activation(op_type, w_shape, args):
    """The reference int8 kernels share the output stage: Deconv2D (no fast kernel) too."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (1, 4, 4, 3) if op_type == "FullyConnected" else (1, 5, 5, 4)).astype(np.float32)
    if op_type == "FullyConnected":
        x = x.reshape(1, 48)
    consts = {"w": rng.uniform(-1, 1, w_shape).astype(np.float32)}
    graph = make_graph(x.shape, [(op_type, ["x", "w"], ["y"], args)], consts)
    want = Engine(copy.deepcopy(graph)).run({"x": x})["y"]
    quantize_graph(graph, {"quantize": True, "runtime": "cpu", "calibrate": lambda g: collect_ranges(g, [{"x": x}])})
    engine = Engine(graph, options={"reference_kernels": True})
    assert {n.op.type: n.tag for n in engine.nodes}[op_type] == "int8"
    got = engine.run({"x": x})["y"]
    cos = float(np.dot(got.ravel(), want.ravel()) / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos > 0.995, cos


@needs_loops
@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 200, 4099])
def test_the_lookup_loop_equals_numpy_take(n):
    """_qloops.lookup (64 bytes per vpermi2b pair where the CPU has AVX-512 VBMI, the rest one
    by one): every code, both halves of the table, ragged lengths, in place and split."""
    lib = _qjit.qloops()
    rng = np.random.default_rng(n)
    table = rng.integers(0, 256, 256).astype(np.uint8)
    x = rng.integers(0, 256, n).astype(np.uint8)
    x[:min(n, 256)] = np.arange(256, dtype=np.uint8)[:min(n, 256)]
    want = table[x]
    out = np.zeros_like(x)
    lib.lookup(x, table, out, 0, n)
    np.testing.assert_array_equal(out, want)
    inplace = x.copy()
    lib.lookup(inplace, table, inplace, 0, n)
    np.testing.assert_array_equal(inplace, want)
    if n > 2:
        parts = np.zeros_like(x)
        lib.lookup(x, table, parts, 0, n // 3)
        lib.lookup(x, table, parts, n // 3, n)
        np.testing.assert_array_equal(parts, want)
