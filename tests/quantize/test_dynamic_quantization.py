"""onnxruntime's quantize_dynamic output (issue 34 item 1): models made by onnxruntime's own
quantize_dynamic from small float models built here (an MLP: MatMulInteger; a CNN:
ConvInteger; QUInt8 and QInt8 weights, per tensor and per channel), and the same models after
onnxruntime's graph optimizer (which fuses the MLP into com.microsoft DynamicQuantizeMatMul, and
shared inputs into MatMulIntegerToFloat), converted and run through the CLI with `run --validate`
against onnxruntime, and our saved outputs compared with onnxruntime's.

DynamicQuantizeLinear is onnxruntime's formula to the bit and the integer matmuls are exact;
ConvInteger is a float32 Conv over the integers, exact while its sums stay below 2^24 (so on
these models the outputs are onnxruntime's to float32 rounding: bounds 1e-5 of the output's
peak). On a deep net (onnx's light ResNet-50, 53 ConvIntegers of up to 4,608 terms) a sum
rounded in float32 can move a later DynamicQuantizeLinear's integer by one step; measured: cosine
0.99997 to onnxruntime (the float model is at 0.9996 from it), max error 0.6% of the peak.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from mace.onnx_backend import prepare
from tests.cli_helpers import cli, sha256, write_deployment

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
F32 = np.float32
MS_OPS = {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"}


def _model(nodes, inits, x_shape, outputs):
    graph = helper.make_graph(nodes, "float", [helper.make_tensor_value_info("x", 1, x_shape)],
                              [helper.make_tensor_value_info(o, 1, None) for o in outputs],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def mlp(rng):
    """x -> MatMul+Add -> Relu -> two MatMuls reading the same tensor (one with a bias)."""
    inits = {"w1": rng.normal(0, 0.3, (16, 32)), "b1": rng.normal(0, 0.1, 32),
             "w2": rng.normal(0, 0.3, (32, 10)), "w3": rng.normal(0, 0.3, (32, 6)),
             "b3": rng.normal(0, 0.1, 6)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"]),
             helper.make_node("MatMul", ["r", "w3"], ["z0"]), helper.make_node("Add", ["z0", "b3"], ["z"])]
    return _model(nodes, {k: v.astype(F32) for k, v in inits.items()}, [4, 16], ["y", "z"]), [4, 16]


def cnn(rng):
    """Conv 3->16 (bias) -> Relu -> Conv 16->32 stride 2 -> Relu -> Conv 32->8 (288 terms a sum)."""
    inits = {"w1": rng.normal(0, 0.3, (16, 3, 3, 3)), "b1": rng.normal(0, 0.1, 16),
             "w2": rng.normal(0, 0.1, (32, 16, 3, 3)), "w3": rng.normal(0, 0.1, (8, 32, 3, 3))}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["y"], pads=[1, 1, 1, 1])]
    return _model(nodes, {k: v.astype(F32) for k, v in inits.items()}, [1, 3, 12, 12], ["y"]), [1, 3, 12, 12]


BUILDERS = {"mlp": mlp, "cnn": cnn}
VARIANTS = [(kind, wt, pc, fused) for kind in BUILDERS for wt in ("QUInt8", "QInt8")
            for pc in (False, True) for fused in (False, True)]


def _variant_name(kind, wt, pc, fused):
    return f"{kind}_{wt.lower()}{'_pc' if pc else ''}{'_fused' if fused else ''}"


def dynamic_model(work, kind, weight_type, per_channel, fused, seed=0):
    """onnxruntime's quantize_dynamic of the float model (and its graph optimizer's output when
    `fused`): (path, input shape, output names)."""
    model, shape = BUILDERS[kind](np.random.default_rng(seed))
    name = _variant_name(kind, weight_type, per_channel, fused)
    onnx.save(model, str(work / f"{name}_float.onnx"))
    path = work / f"{name}.onnx"
    quantize_dynamic(str(work / f"{name}_float.onnx"), str(path),
                     weight_type=getattr(QuantType, weight_type), per_channel=per_channel)
    if fused:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(work / f"{name}_opt.onnx")
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        path = work / f"{name}_opt.onnx"
    return path, shape, [o.name for o in model.graph.output]


def _cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_quantize_dynamic_models_through_the_cli(tmp_path):
    """16 models (MLP/CNN x QUInt8/QInt8 x per tensor/per channel x as saved/optimized by
    onnxruntime) in one deployment file: convert, run --validate, outputs against onnxruntime."""
    work, rng = tmp_path, np.random.default_rng(1)
    (work / "in").mkdir()
    models, feeds, seen = {}, {}, set()
    for variant in VARIANTS:
        name = _variant_name(*variant)
        path, shape, outputs = dynamic_model(work, *variant)
        kinds = {n.op_type for n in onnx.load(str(path)).graph.node}
        seen |= kinds
        if variant[0] == "cnn":
            assert "ConvInteger" in kinds and "DynamicQuantizeLinear" in kinds, kinds
        x = rng.normal(size=shape).astype(F32)
        np.save(work / "in" / f"{name}.npy", x)
        feeds[name] = (path, x, outputs)
        models[name] = {
            "platform": "onnx", "model_file_path": path.name, "model_sha256_checksum": sha256(path),
            "runtime": "cpu", "subgraphs": [{
                "input_tensors": "x", "input_shapes": ",".join(map(str, shape)),
                "input_data_formats": "NONE", "output_tensors": outputs,
                "output_data_formats": "NONE", "validation_inputs_data": [f"in/{name}.npy"]}]}
    # what onnxruntime made: the unfused ops and the com.microsoft fused ones
    assert {"MatMulInteger", "ConvInteger", "DynamicQuantizeLinear", *MS_OPS} <= seen, seen
    write_deployment(work / "dyn.yml", models, library="dyn")
    r = cli("convert", "--config=dyn.yml", "--build_dir=out", cwd=work, timeout=600)
    assert r.returncode == 0, r.stderr
    for name, (path, x, outputs) in feeds.items():
        r = cli("run", "--config=dyn.yml", "--build_dir=out", f"--model_name={name}", "--validate",
                f"--json={name}.json", f"--output_dir=res/{name}", cwd=work, timeout=300)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        records = json.loads((work / f"{name}.json").read_text())["models"][0]["validation"]
        assert [v["name"] for v in records] == outputs
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(outputs, {"x": x})
        for v, out, expected in zip(records, outputs, want):
            assert v["passed"] and v["cosine"] >= 0.99999, (name, v)
            got = np.load(work / "res" / name / f"{out}.npy")
            assert _cosine(got, expected) >= 0.99999, name
            peak = float(np.abs(expected).max())
            assert float(np.abs(got - expected).max()) <= 1e-5 * peak, (name, out)


def test_quantize_dynamic_ops_map_to_ops_of_distinct_names(tmp_path):
    """Each op of a converted dynamic model has its own name: the GPU runtime places ops by
    name, and ConvInteger's trailing Cast once shared the float Conv's (so a GPU run built that
    CPU-placed Cast as a GPU kernel and failed: 'Cast has no kernel for gpu')."""
    for variant in VARIANTS:
        path, shape, _ = dynamic_model(tmp_path, *variant)
        x = np.random.default_rng(0).normal(size=shape).astype(F32)
        names = [op.name for op in prepare(onnx.load(str(path)), {"x": x}).graph.net.op]
        dup = sorted({n for n in names if names.count(n) > 1})
        assert not dup, (_variant_name(*variant), dup)


def test_quantize_dynamic_resnet50_from_onnx_light_models(tmp_path):
    """onnx's light ResNet-50 with random weights, through quantize_dynamic (53 ConvIntegers):
    the logits against onnxruntime's (measured: cosine 0.99997, max error 0.6% of the peak;
    the float model's logits are at cosine 0.9996 from onnxruntime's quantized ones)."""
    from mace.testing.onnx_models import data_input, randomized

    model = randomized("resnet50")
    logits = next(n for n in reversed(model.graph.node) if n.op_type == "Softmax").input[0]
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info(logits, 1, None))
    onnx.save(model, str(tmp_path / "float.onnx"))
    quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "dyn.onnx"),
                     weight_type=QuantType.QUInt8)
    qmodel = onnx.load(str(tmp_path / "dyn.onnx"))
    assert sum(n.op_type == "ConvInteger" for n in qmodel.graph.node) == 53
    name, shape = data_input(qmodel)
    x = np.random.default_rng(0).uniform(0, 1, shape).astype(F32)
    want = ort.InferenceSession(str(tmp_path / "dyn.onnx"),
                                providers=["CPUExecutionProvider"]).run(None, {name: x})[0]
    got = prepare(qmodel, {name: x}).run({name: x})[logits]
    assert _cosine(got, want) >= 0.9999
    assert float(np.abs(got - want).max()) <= 0.02 * float(np.abs(want).max())


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_quantize_dynamic_models_with_quantize_1(tmp_path, kind):
    """quantize: 1 over a quantize_dynamic model: DynamicQuantize and MatMulInteger stay float
    (no int8 kernels), the float ops around them (ConvInteger's Conv, the scale products) are
    quantized with calibrated ranges. Measured: cosine 0.9997 (CNN), 0.99986 (MLP)."""
    from mace.quantize.calibrate import collect_ranges

    path, shape, outputs = dynamic_model(tmp_path, kind, "QUInt8", False, False)
    rng = np.random.default_rng(0)
    samples = [{"x": rng.normal(size=shape).astype(F32)} for _ in range(4)]
    engine = prepare(onnx.load(str(path)), samples[0],
                     options={"quantize": True, "calibrate": lambda g: collect_ranges(g, samples)})
    assert "Quantize" in {op.type for op in engine.graph.net.op}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, samples[0])
    got = engine.run(samples[0])
    for name, expected in zip(outputs, want):
        assert _cosine(got[name], expected) >= 0.999, name


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quantize_dynamic_lstm(tmp_path, direction, per_channel):
    """quantize_dynamic's com.microsoft DynamicQuantizeLSTM: the float LSTM over its dequantized
    weights. onnxruntime also rounds X and each step's h to 8 bits, which we do not repeat;
    measured: cosine >= 0.99996 on Y, Y_h, Y_c, max error <= 0.009 (the float model, for
    comparison: cosine 0.9999, max error 0.018 from onnxruntime's quantized run)."""
    rng = np.random.default_rng(2)
    steps, batch, size, hidden = 6, 2, 8, 16
    d = 2 if direction == "bidirectional" else 1
    inits = {"W": rng.normal(0, 0.3, (d, 4 * hidden, size)), "R": rng.normal(0, 0.3, (d, 4 * hidden, hidden)),
             "B": rng.normal(0, 0.1, (d, 8 * hidden))}
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "yh", "yc"], hidden_size=hidden,
                            direction=direction)
    model = _model([node], {k: v.astype(F32) for k, v in inits.items()}, [steps, batch, size],
                   ["y", "yh", "yc"])
    onnx.save(model, str(tmp_path / "float.onnx"))
    quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "dyn.onnx"), per_channel=per_channel)
    qmodel = onnx.load(str(tmp_path / "dyn.onnx"))
    assert [n.op_type for n in qmodel.graph.node] == ["DynamicQuantizeLSTM"]
    x = rng.normal(size=(steps, batch, size)).astype(F32)
    want = ort.InferenceSession(str(tmp_path / "dyn.onnx"),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = prepare(qmodel, {"x": x}).run({"x": x})
    for name, expected in zip(("y", "yh", "yc"), want):
        assert got[name].shape == expected.shape
        assert _cosine(got[name], expected) >= 0.9999, name
        assert float(np.abs(got[name] - expected).max()) <= 0.02, name
