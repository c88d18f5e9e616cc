"""Quantization-aware ranges: ONNX Q/DQ pairs and TensorFlow FakeQuant keep their own ranges.

Small hand-built ONNX graphs check the Q/DQ mapping against onnxruntime (constant
folding per axis, the range of a pair, the ReLU an exporter folded into a pair);
then whole models go through the CLI with no calibration data at all, so every
range must come from the model: a TensorFlow graph with FakeQuant nodes and a
MobileNet v2 quantized to QDQ by onnxruntime.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from mace.errors import ModelError
from mace.ir.qat_ranges import qat_ranges
from mace.ir.args import get_arg
from mace.ir.model_io import load_net
from mace.onnx_backend import prepare
from mace.quantize.calibrate import collect_ranges
from mace.ir.quant_params import activation_params, params_from_info
from tests.cli_helpers import cli
from tests.quantize.qcase import assert_grid_close

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def onnx_model(nodes, inits, x_shape, out_name, out_shape):
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, out_shape)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def ort_run(model, x, optimize=True):
    options = ort.SessionOptions()
    if not optimize:   # the nodes as written, one by one
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def rand(*shape, seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def same_params(p, lo, hi) -> bool:
    """p is activation_params(lo, hi), up to float32 rounding of the range."""
    want = activation_params(lo, hi)
    return p.zero_point == want.zero_point and p.scale == pytest.approx(want.scale, rel=1e-6)


# ---- the ONNX mapping -------------------------------------------------------------------
def test_dequantized_weights_and_bias_fold_to_float_per_axis():
    rng = np.random.default_rng(1)
    inits = {"wq": rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8),
             "ws": np.array([0.01, 0.02, 0.005, 0.03], np.float32),
             "wz": np.array([0, 3, -2, 1], np.int8),
             "bq": rng.integers(-500, 500, 4).astype(np.int32),
             "bs": np.array([1e-3, 2e-3, 5e-4, 3e-3], np.float32)}
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs"], ["b"], axis=0),
             helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])]
    model = onnx_model(nodes, inits, [1, 3, 5, 5], "y", [1, 4, 5, 5])
    x = rand(1, 3, 5, 5)
    engine = prepare(model, {"x": x})
    # nothing of the DequantizeLinear nodes is left (the Transposes are the NCHW interface)
    assert [op.type for op in engine.graph.net.op if op.type != "Transpose"] == ["Conv2D"]
    np.testing.assert_allclose(engine.run({"x": x})["y"], ort_run(model, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype, zero, relu", [(np.uint8, 131, False), (np.int8, 3, False),
                                               (np.uint8, 0, True), (np.int8, -128, True)])
def test_a_pair_on_an_activation_keeps_its_range(dtype, zero, relu):
    """x * x - x -> Q -> DQ -> * 3: the pair's range is scale * (qmin - zp) .. scale * (qmax - zp);
    a range starting at 0 clamps like the Relu/Clip exporters fold into it."""
    scale = np.float32(0.04)   # every range below holds x * x - x (no clamp at the top)
    inits = {"s": np.array(scale), "z": np.array(zero, dtype), "three": np.array(3.0, np.float32)}
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),                    # an op before the pair
             helper.make_node("Sub", ["sq", "x"], ["a"]),
             helper.make_node("QuantizeLinear", ["a", "s", "z"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "s", "z"], ["adq"]),
             helper.make_node("Mul", ["adq", "three"], ["y"])]
    model = onnx_model(nodes, inits, [2, 40], "y", [2, 40])
    x = rand(2, 40, lo=-1.5, hi=1.5)
    engine = prepare(model, {"x": x})
    info = np.iinfo(dtype)
    lo, hi = float(scale * (info.min - zero)), float(scale * (info.max - zero))
    ranges = qat_ranges(engine.graph.net)
    held = {t: r for t, r in ranges.items() if t in {o for op in engine.graph.net.op for o in op.output}}
    # the pair's input and its FakeQuantize's output
    assert list(held.values()) == [(pytest.approx(lo), pytest.approx(hi), 8, 0)] * 2
    # the float model computes what onnxruntime does, rounding included (FakeQuantize)
    got, want = engine.run({"x": x})["y"], ort_run(model, x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    steps = got / (3 * scale)
    np.testing.assert_allclose(steps, np.rint(steps), atol=1e-4)   # every value on the grid
    assert (float(got.min()) >= 0.0) == relu   # clamped at 0 exactly when the range starts at 0
    assert [op.type for op in engine.graph.net.op].count("FakeQuantize") == 1
    # quantizing, the pair is the clamp it implies: RELUX exactly when the range starts at 0
    q = prepare(model, {"x": x}, options={"quantize": True,
                                          "calibrate": lambda g: collect_ranges(g, [{"x": x}])})
    assert "FakeQuantize" not in {op.type for op in q.graph.net.op}
    kinds = {get_arg(op, "activation", "") for op in q.graph.net.op}
    assert ("RELUX" in kinds) == relu


def test_the_range_of_a_folded_relu_lands_on_the_fused_conv():
    """Conv -> Q(zp = 0) -> DQ, as onnxruntime writes Conv + Relu: the conv computes the
    ReLU(max) itself and its quantized output has the pair's parameters."""
    rng = np.random.default_rng(2)
    inits = {"w": (rng.standard_normal((6, 3, 3, 3)) * 0.3).astype(np.float32),
             "s": np.array(0.01, np.float32), "z": np.array(0, np.uint8),
             "si": np.array(2 / 255, np.float32), "zi": np.array(128, np.uint8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "si", "zi"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "si", "zi"], ["xdq"]),
             helper.make_node("Conv", ["xdq", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"])]
    model = onnx_model(nodes, inits, [1, 3, 6, 6], "y", [1, 6, 6, 6])
    x = rand(1, 3, 6, 6)
    float_engine = prepare(model, {"x": x})
    want = ort_run(model, x)
    # The float model rounds the input (step 2/255) and the output (step 0.01) as the ONNX
    # graph says: what onnxruntime computes running the nodes one by one (the same values here;
    # both convs are float sums whose order depends on the CPU's kernels, so an output at a
    # rounding tie may land one step away elsewhere). Its optimised graph rewrites the pairs
    # (a fifth of the outputs one step away).
    got = float_engine.run({"x": x})["y"]
    assert_grid_close(got, ort_run(model, x, optimize=False), step=0.01, what="y")
    np.testing.assert_allclose(got, want, atol=0.0101)
    q = prepare(model, {"x": x}, options={"quantize": True})
    conv = [op for op in q.graph.net.op if op.type == "Conv2D"]
    assert len(conv) == 1 and get_arg(conv[0], "activation") == "RELUX"
    assert get_arg(conv[0], "max_limit") == pytest.approx(2.55)
    (qconv,) = [op for op in q.graph.net.op if op.type == "Conv2D"]
    assert same_params(params_from_info(qconv.quantize_info[0]), 0.0, 2.55)
    (quant,) = [op for op in q.graph.net.op if op.type == "Quantize"]
    assert same_params(params_from_info(quant.quantize_info[0]), -256 / 255, 254 / 255)
    got = q.run({"x": x})["y"]   # the same input rounding; int8 weights; output on the same grid
    np.testing.assert_allclose(got, want, atol=0.0201)   # two steps of 0.01
    assert np.abs(got - want).mean() < 0.003


def test_a_4d_model_output_keeps_its_range_through_the_layout_change():
    """The conv runs NHWC and writes a new tensor that a Transpose turns into the NCHW output:
    that tensor takes the output's range (no calibration here: it would be missing)."""
    rng = np.random.default_rng(3)
    inits = {"w": (rng.standard_normal((5, 3, 3, 3)) * 0.3).astype(np.float32),
             "si": np.array(2 / 255, np.float32), "zi": np.array(128, np.uint8),
             "s": np.array(0.03, np.float32), "z": np.array(100, np.uint8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "si", "zi"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "si", "zi"], ["xdq"]),
             helper.make_node("Conv", ["xdq", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"])]
    model = onnx_model(nodes, inits, [1, 3, 6, 6], "y", [1, 5, 6, 6])
    x = rand(1, 3, 6, 6)
    q = prepare(model, {"x": x}, options={"quantize": True})
    (conv,) = [op for op in q.graph.net.op if op.type == "Conv2D"]
    assert conv.output[0] != "y"                              # the NHWC tensor before the Transpose
    assert same_params(params_from_info(conv.quantize_info[0]), -3.0, 0.03 * 155)
    np.testing.assert_allclose(q.run({"x": x})["y"], ort_run(model, x), atol=0.0601)   # two steps


def test_lone_quantize_and_dequantize_compute_what_onnx_does():
    """Outside a pair (a Q read by another op, a DQ of an integer input) the ops compute."""
    inits = {"s": np.array([0.05, 0.1, 0.02], np.float32), "z": np.array([10, 128, 250], np.uint8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
             helper.make_node("DequantizeLinear", ["u", "s", "z"], ["d"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                                           helper.make_tensor_value_info("u", TensorProto.UINT8, [2, 3, 4])],
                              [helper.make_tensor_value_info("qf", TensorProto.FLOAT, [2, 3, 4]),
                               helper.make_tensor_value_info("d", TensorProto.FLOAT, [2, 3, 4])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    feeds = {"x": rand(2, 3, 4, lo=-8, hi=8),   # saturates at both ends for some channels
             "u": np.random.default_rng(4).integers(0, 256, (2, 3, 4)).astype(np.uint8)}
    feeds["x"][0, 0, 0] = 0.125                  # x / scale = 2.5: rounds half to even
    engine = prepare(model, feeds)
    got = engine.run(feeds)
    # bit for bit ONNX's formulas in numpy (an IEEE division and round-half-to-even: the same on
    # every CPU); onnxruntime's kernels are picked per CPU
    s, z = inits["s"].reshape(1, 3, 1), inits["z"].reshape(1, 3, 1).astype(np.float32)
    np.testing.assert_array_equal(got["qf"], np.clip(np.rint(feeds["x"] / s) + z, 0, 255))
    assert got["qf"][0, 0, 0] == 12   # 0.125 / 0.05 = 2.5 rounds to 2, + 10
    np.testing.assert_allclose(got["d"], (feeds["u"] - z) * s, rtol=1e-6)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["qf", "d"], feeds)
    assert_grid_close(got["qf"], want[0], step=1, what="qf")
    np.testing.assert_allclose(got["d"], want[1], rtol=1e-6)


def test_a_per_axis_pair_on_an_activation_is_refused():
    inits = {"s": np.array([0.1, 0.2], np.float32), "z": np.array([0, 0], np.uint8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, name="dq_per_axis")]
    model = onnx_model(nodes, inits, [3, 2], "y", [3, 2])
    with pytest.raises(ModelError, match="dq_per_axis.*per-axis"):
        prepare(model, {"x": rand(3, 2)})


# ---- whole models through the CLI, no calibration data ---------------------------------
def model_entry(platform, path, data, size, outputs, output_shape="1,10"):
    sg = {"input_tensors": "input", "input_shapes": f"1,{size},{size},3", "input_data_formats": "NHWC",
          "input_ranges": "-1,1", "output_tensors": outputs, "output_shapes": [output_shape] * len(outputs),
          "output_data_formats": "NONE"}
    return {"platform": platform, "model_file_path": path, "model_sha256_checksum": hashlib.sha256(data).hexdigest(),
            "subgraphs": [sg], "runtime": "cpu", "quantize": 1}


def convert_and_validate(work, models: dict) -> dict:
    (work / "q.yml").write_text(yaml.safe_dump({"library_name": "qat", "target_abis": ["host"],
                                                "models": models}, sort_keys=False))
    r = cli("convert", "--config=q.yml", "--build_dir=out", cwd=work, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("run", "--config=q.yml", "--build_dir=out", "--validate", "--json=r.json", cwd=work, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return {m["model"]: m for m in json.loads((work / "r.json").read_text())["models"]}


def quantized_outputs(net) -> dict:
    """tensor -> QuantParams of every op output in the quantized domain."""
    return {t: params_from_info(info) for op in net.op for t, info in zip(op.output, op.quantize_info)}


def test_tensorflow_fake_quant_model_converts_with_its_own_ranges(tmp_path):
    from mace.testing.quant_models import QAT_RANGES, qat_tf_graph

    graph_def, output = qat_tf_graph(size=12)
    data = graph_def.SerializeToString(deterministic=True)
    (tmp_path / "qat.pb").write_bytes(data)
    report = convert_and_validate(tmp_path, {"qat": model_entry("tensorflow", "qat.pb", data, 12, [output])})
    (metric,) = report["qat"]["validation"]
    assert metric["passed"] and metric["threshold"] == 0.98 and metric["cosine"] >= 0.98, metric

    net = load_net(tmp_path / "out" / "qat" / "model" / "qat.pb")
    assert get_arg(net, "quantize") == 1
    got = [(op.type, params_from_info(op.quantize_info[0])) for op in net.op if op.type != "Dequantize"]
    r = QAT_RANGES
    want = [("Quantize", r["input"]),            # input_ranges says -1,1: the FakeQuant wins
            ("Conv2D", r["conv1"]),
            ("DepthwiseConv2d", (0.0, r["dw_pre_relu"][1])),   # the range before the ReLU, through it
            ("Conv2D", r["conv2"]), ("Reduce", r["pool"]), ("FullyConnected", r["logits"])]
    assert [t for t, _ in got] == [t for t, _ in want]
    for (op_type, p), (_, (lo, hi)) in zip(got, want):
        assert same_params(p, lo, hi), (op_type, p, lo, hi)


def qdq_mobilenet(work, size: int, samples: int) -> tuple:
    """onnxruntime's QDQ quantization of a MobileNet v2 (tmp/qdq.onnx, calibrated on `samples`
    uniform inputs): (the file's bytes, the output's name)."""
    from mace.testing.mobilenet_v2 import mobilenet_v2
    from mace.testing.quant_models import qdq_model, uniform_samples

    model = mobilenet_v2(seed=0, resolution=size, classes=10)
    onnx.save(model, str(work / "float.onnx"))
    views = [s.transpose(0, 3, 1, 2).copy() for s in uniform_samples((1, size, size, 3), samples, seed=1)]
    qdq_model(work / "float.onnx", work / "qdq.onnx", "input", views)
    return (work / "qdq.onnx").read_bytes(), model.graph.output[0].name


def test_onnxruntime_qdq_mobilenet_converts_with_its_own_ranges(tmp_path):
    size = 32
    data, out = qdq_mobilenet(tmp_path, size, 8)
    report = convert_and_validate(tmp_path, {"qdq": model_entry("onnx", "qdq.onnx", data, size, [out])})
    (metric,) = report["qdq"]["validation"]   # against onnxruntime running the QDQ model
    assert metric["passed"] and metric["cosine"] >= 0.98, metric

    net = load_net(tmp_path / "out" / "qat" / "model" / "qdq.pb")
    got = quantized_outputs(net)
    ranges = qat_ranges(net)
    convs = [op.output[0] for op in net.op if op.type in ("Conv2D", "DepthwiseConv2d")]
    assert len(convs) == 52
    for t in convs:   # each layer's output: the range of the Q/DQ pair after it
        lo, hi, bits, _ = ranges[t]
        assert bits == 8 and same_params(got[t], lo, hi), t
    # the pairs' ranges are onnxruntime's: scale * (0 - zp) .. scale * (255 - zp)
    qdq = onnx.load(str(tmp_path / "qdq.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    checked = 0
    for node in qdq.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] in ranges:
            s, z = float(inits[node.input[1]]), int(inits[node.input[2]])
            lo, hi, _, _ = ranges[node.output[0]]
            assert (lo, hi) == (pytest.approx(-z * s, rel=1e-6), pytest.approx((255 - z) * s, rel=1e-6))
            checked += 1
    assert checked > 10


def test_input_ranges_in_the_deployment_file_set_the_input_range(tmp_path):
    """A QDQ model whose input has no Q/DQ pair: the input's range is the .yml's input_ranges
    (no calibration data), the layers' are the model's."""
    rng = np.random.default_rng(5)
    inits = {"w": (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32),
             "fc_w": (rng.standard_normal((10, 4 * 8 * 8)) * 0.05).astype(np.float32),
             "fc_b": (rng.standard_normal(10) * 0.1).astype(np.float32),
             "s": np.array(0.02, np.float32), "z": np.array(0, np.uint8),
             "s2": np.array(0.01, np.float32), "z2": np.array(120, np.uint8)}
    nodes = [helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["cdq"]),
             helper.make_node("Flatten", ["cdq"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["g"], transB=1),
             helper.make_node("QuantizeLinear", ["g", "s2", "z2"], ["gq"]),
             helper.make_node("DequantizeLinear", ["gq", "s2", "z2"], ["logits"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    entry = model_entry("onnx", "m.onnx", (tmp_path / "m.onnx").read_bytes(), 8, ["logits"])
    entry["subgraphs"][0]["input_ranges"] = "-0.5,2"
    report = convert_and_validate(tmp_path, {"m": entry})
    (metric,) = report["m"]["validation"]   # random inputs in [-0.5, 2]
    assert metric["passed"] and metric["cosine"] >= 0.98, metric

    net = load_net(tmp_path / "out" / "qat" / "model" / "m.pb")
    got = {op.type: params_from_info(op.quantize_info[0]) for op in net.op if op.quantize_info}
    assert same_params(got["Quantize"], -0.5, 2.0)
    assert same_params(got["Conv2D"], 0.0, 0.02 * 255)
    assert same_params(got["FullyConnected"], -1.2, 1.35)


def test_a_qdq_model_converted_float_says_how_to_run_it_on_int8_kernels(tmp_path):
    """Converted without `quantize`, a QDQ model runs float with a FakeQuantize per pair
    (faithful but slower than its float original): convert says so and names the key; the key
    it names then converts and validates against onnxruntime running the QDQ model."""
    size = 16
    data, out = qdq_mobilenet(tmp_path, size, 4)
    entry = model_entry("onnx", "qdq.onnx", data, size, [out])
    entry.pop("quantize")
    (tmp_path / "f.yml").write_text(yaml.safe_dump({"library_name": "qf", "target_abis": ["host"],
                                                    "models": {"qdq": entry}}, sort_keys=False))
    r = cli("convert", "--config=f.yml", "--build_dir=out", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    text = " ".join(r.stdout.split())
    assert "FakeQuantize op(s) from Q/DQ pairs" in text and "`quantize: 1`" in text, r.stdout
    fake = sum(op.type == "FakeQuantize" for op in load_net(tmp_path / "out" / "qf" / "model" / "qdq.pb").op)
    assert f"carries its own quantization ({fake} FakeQuantize" in text and fake > 10
    # the hint, followed: the same entry with quantize: 1 runs quantized and validates
    report = convert_and_validate(tmp_path, {"qdq": model_entry("onnx", "qdq.onnx", data, size, [out])})
    (metric,) = report["qdq"]["validation"]
    assert metric["passed"] and metric["cosine"] >= 0.98, metric
    assert get_arg(load_net(tmp_path / "out" / "qat" / "model" / "qdq.pb"), "quantize") == 1
