"""com.microsoft QAttention (onnxruntime's quantized BERT attention; issue 34 item 1): the float
attention over the dequantized input and weights, against onnxruntime's own QAttention kernel.

Inputs from DynamicQuantizeLinear (run-time scale and zero point) or QuantizeLinear (constant
ones), int8 and uint8 weights, one weight scale or one per column, with and without the 2-D
1/0 mask; the unsupported forms (causal, 1-D mask_index) are refused naming the node. onnxruntime
multiplies the integers in int32; ours are float32 products of the same integers: equal to
float32 rounding (bounds: 1e-5 of the output's peak).
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace.errors import MaceError
from mace.onnx_backend import prepare
from tests.cli_helpers import cli, sha256, write_deployment

B, S, D, H, N = 2, 6, 16, 24, 4


def qattention_model(rng, weight_type=np.int8, per_column=False, mask=False, dynamic=True, **attrs):
    lo, hi = (-100, 100) if weight_type == np.int8 else (0, 255)
    w = rng.integers(lo, hi, (D, 3 * H)).astype(weight_type)
    inits = {"w": w, "bias": rng.normal(0, 0.1, 3 * H).astype(np.float32),
             "ws": (rng.uniform(0.005, 0.02, 3 * H) if per_column else np.array(0.01)).astype(np.float32)}
    if weight_type == np.uint8:
        inits["wz"] = np.array(128, np.uint8)
    if dynamic:
        quantize = helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])
    else:
        inits.update(xs=np.array(0.02, np.float32), xz=np.array(120, np.uint8))
        quantize = helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"])
    inputs = ["xq", "w", "bias", "xs", "ws", "mask" if mask else "", "xz", "wz" if "wz" in inits else ""]
    node = helper.make_node("QAttention", inputs, ["y"], domain="com.microsoft", num_heads=N, **attrs)
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, D])]
    if mask:
        graph_inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [B, S]))
    graph = helper.make_graph([quantize, node], "qattention", graph_inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, S, H])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    feed = {"x": rng.normal(0, 1, (B, S, D)).astype(np.float32)}
    if mask:
        feed["mask"] = np.array([[1, 1, 1, 1, 0, 0], [1] * S], np.int32)
    return model, feed


def onnxruntime_output(model, feed) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]


@pytest.mark.parametrize("weight_type,per_column,mask,dynamic", [
    (np.int8, False, False, True), (np.int8, True, True, True), (np.uint8, False, True, True),
    (np.uint8, True, False, False)])
def test_qattention_matches_onnxruntime(weight_type, per_column, mask, dynamic):
    model, feed = qattention_model(np.random.default_rng(1), weight_type, per_column, mask, dynamic)
    want = onnxruntime_output(model, feed)
    got = prepare(model, feed).run(feed)["y"]
    assert got.shape == want.shape == (B, S, H)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_the_mask_changes_the_result_as_onnxruntime_says():
    """A check that the mask is applied at all: masked keys move the first row's outputs."""
    model, feed = qattention_model(np.random.default_rng(2), mask=True)
    engine = prepare(model, feed)
    masked = engine.run(feed)["y"].copy()
    open_ = engine.run({**feed, "mask": np.ones((B, S), np.int32)})["y"]
    assert np.abs(masked[0] - open_[0]).max() > 1e-3 and np.allclose(masked[1], open_[1], atol=1e-6)
    np.testing.assert_allclose(open_, onnxruntime_output(model, {**feed, "mask": np.ones((B, S), np.int32)}),
                               rtol=0, atol=1e-5 * np.abs(open_).max())


def test_unsupported_forms_are_refused_naming_the_node():
    model, feed = qattention_model(np.random.default_rng(3), unidirectional=1)
    with pytest.raises(MaceError, match=r"QAttention.*unidirectional"):
        prepare(model, feed)


def test_qattention_through_the_cli_validates_against_onnxruntime(tmp_path):
    import onnx
    model, feed = qattention_model(np.random.default_rng(4), mask=True)
    onnx.save(model, str(tmp_path / "qa.onnx"))
    np.save(tmp_path / "x.npy", feed["x"])
    np.save(tmp_path / "mask.npy", feed["mask"])
    sg = {"input_tensors": ["x", "mask"], "input_shapes": [f"{B},{S},{D}", f"{B},{S}"],
          "input_data_types": ["float32", "int32"], "input_data_formats": ["NONE", "NONE"],
          "output_tensors": "y", "output_shapes": f"{B},{S},{H}", "output_data_formats": "NONE",
          "validation_inputs_data": ["x.npy", "mask.npy"]}
    write_deployment(tmp_path / "d.yml", {"qa": {"platform": "onnx", "model_file_path": "qa.onnx",
                                                 "model_sha256_checksum": sha256(tmp_path / "qa.onnx"),
                                                 "runtime": "cpu", "subgraphs": [sg]}}, library="qa")
    assert cli("convert", "--config=d.yml", cwd=tmp_path).returncode == 0
    r = cli("run", "--config=d.yml", "--validate", cwd=tmp_path)
    assert r.returncode == 0 and "Similarity test passed" in r.stdout, r.stdout + r.stderr
