"""ONNX QOperator models (QLinearConv, QLinearMatMul, onnxruntime's com.microsoft QLinear ops)
against onnxruntime: in float each quantized tensor is a FakeQuantize of the float result, so
our CPU run computes what onnxruntime's integer kernels do, to float32 rounding."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace.errors import UnsupportedOpError
from mace.onnx_backend import prepare
from mace.quantize.calibrate import collect_ranges
from tests.quantize.qcase import assert_grid_close

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MS = "com.microsoft"


def ort_run(model, feed):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feed)


def _model(nodes, inits, inputs, outputs, opset=13):
    graph = helper.make_graph(nodes, "qop", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                             for n, s in inputs.items()],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                               for n, s in outputs.items()],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model


def _grid(name, scale, zero):
    return {f"{name}_s": np.array(scale, np.float32), f"{name}_z": np.array(zero, np.uint8)}


def test_microsoft_qlinear_ops_match_onnxruntime():
    """x -> Q -> QLinearConv -> MaxPool (integers) -> QLinearLeakyRelu / QLinearSigmoid ->
    QLinearConcat -> QLinearMul by itself -> QLinearAdd -> QLinearAveragePool ->
    QLinearGlobalAveragePool -> Flatten -> QGemm (float output)."""
    rng = np.random.default_rng(0)
    inits = {**_grid("x", 2 / 255, 128), **_grid("c", 0.05, 100), **_grid("l", 0.04, 90),
             **_grid("g", 1 / 255, 0), **_grid("k", 0.05, 110), **_grid("m", 0.1, 20),
             **_grid("a", 0.12, 60), **_grid("p", 0.1, 60), **_grid("v", 0.05, 80),
             "w": rng.integers(-127, 128, (6, 3, 3, 3)).astype(np.int8),
             "w_s": np.array([0.01, 0.02, 0.015, 0.01, 0.03, 0.02], np.float32),
             "w_z": np.zeros(6, np.int8), "b": rng.integers(-300, 300, 6).astype(np.int32),
             "fc": rng.integers(-127, 128, (12, 5)).astype(np.int8),
             "fc_s": np.array(0.02, np.float32), "fc_z": np.array(0, np.int8)}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "x_s", "x_z", "w", "w_s", "w_z", "c_s", "c_z", "b"],
                         ["cq"], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["cq"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QLinearLeakyRelu", ["mp", "c_s", "c_z", "l_s", "l_z"], ["lq"], domain=MS,
                         alpha=0.1),
        helper.make_node("QLinearSigmoid", ["mp", "c_s", "c_z", "g_s", "g_z"], ["gq"], domain=MS),
        helper.make_node("QLinearConcat", ["k_s", "k_z", "lq", "l_s", "l_z", "gq", "g_s", "g_z"],
                         ["kq"], domain=MS, axis=1),
        helper.make_node("QLinearMul", ["kq", "k_s", "k_z", "kq", "k_s", "k_z", "m_s", "m_z"], ["mq"],
                         domain=MS),
        helper.make_node("QLinearAdd", ["mq", "m_s", "m_z", "kq", "k_s", "k_z", "a_s", "a_z"], ["aq"],
                         domain=MS),
        helper.make_node("QLinearAveragePool", ["aq", "a_s", "a_z", "p_s", "p_z"], ["pq"], domain=MS,
                         kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("QLinearGlobalAveragePool", ["pq", "p_s", "p_z", "v_s", "v_z"], ["vq"],
                         domain=MS),
        helper.make_node("Flatten", ["vq"], ["fq"]),
        helper.make_node("QGemm", ["fq", "v_s", "v_z", "fc", "fc_s", "fc_z"], ["y"], domain=MS),
    ]
    model = _model(nodes, inits, {"x": [1, 3, 10, 10]}, {"y": [1, 5]})
    model.graph.output.append(helper.make_tensor_value_info("mq", TensorProto.UINT8, None))
    x = rng.uniform(-1, 1, (1, 3, 10, 10)).astype(np.float32)
    engine = prepare(model, {"x": x})
    types = [op.type for op in engine.graph.net.op]
    assert types.count("Cast") == 1   # mq's integers; MaxPool and Flatten ran on the grid floats
    got, (want, want_mq) = engine.run({"x": x}), ort_run(model, {"x": x})
    # up to the QLinearMul, onnxruntime's integers (the same here; its Sigmoid table and
    # requantization are float code it picks per CPU: within a step of a tie elsewhere)
    assert_grid_close(got["mq"], want_mq, step=1, what="mq")
    # onnxruntime's QLinearAdd and QLinearAveragePool round in fixed point: a handful of their
    # integers land one step from ours (2 and 13 of 300 here), so the float output moves a little
    y = got["y"]
    np.testing.assert_allclose(y, want, rtol=0, atol=0.005 * np.abs(want).max())
    assert float(y.ravel() @ want.ravel() / np.linalg.norm(y) / np.linalg.norm(want)) > 0.99999


@pytest.mark.parametrize("output_float", [False, True])
def test_integer_outputs_and_dequantized_outputs(output_float):
    """A model output that is the integers themselves (uint8), or their DequantizeLinear."""
    inits = {**_grid("x", 0.02, 128), **_grid("y", 0.03, 120),
             "w": np.arange(-8, 8, dtype=np.int8).reshape(4, 4), "w_s": np.array(0.05, np.float32),
             "w_z": np.array(0, np.int8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
             helper.make_node("QLinearMatMul", ["xq", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z"],
                              ["yq"])]
    if output_float:
        nodes.append(helper.make_node("DequantizeLinear", ["yq", "y_s", "y_z"], ["y"]))
    model = _model(nodes, inits, {"x": [3, 4]}, {"y": [3, 4]} if output_float else {})
    if not output_float:
        model.graph.output.append(helper.make_tensor_value_info("yq", TensorProto.UINT8, [3, 4]))
    x = np.random.default_rng(3).uniform(-2, 2, (3, 4)).astype(np.float32)
    got = prepare(model, {"x": x}).run({"x": x})
    want = ort_run(model, {"x": x})[0]
    got = got["y" if output_float else "yq"]
    assert got.dtype == want.dtype
    # the same integers here; onnxruntime requantizes in float code it picks per CPU
    assert_grid_close(got, want, step=0.03 if output_float else 1, what="y" if output_float else "yq")


def test_qoperator_mobilenet_from_onnxruntime(tmp_path):
    """onnxruntime's quantize_static in QOperator format: QLinearConv, QLinearAdd,
    QLinearGlobalAveragePool, QGemm; float and int8 runs against onnxruntime."""
    from mace.testing.mobilenet_v2 import mobilenet_v2
    from mace.testing.quant_models import qdq_model, uniform_samples

    size = 32
    onnx.save(mobilenet_v2(seed=0, resolution=size, classes=10), str(tmp_path / "float.onnx"))
    samples = [s.transpose(0, 3, 1, 2).copy() for s in uniform_samples((1, size, size, 3), 8, seed=1)]
    model = onnx.load(str(qdq_model(tmp_path / "float.onnx", tmp_path / "qop.onnx", "input", samples,
                                    qoperator=True)))
    kinds = {n.op_type for n in model.graph.node}
    assert {"QLinearConv", "QLinearAdd", "QLinearGlobalAveragePool", "QGemm"} <= kinds
    feed = {"input": samples[0]}
    want = ort_run(model, feed)[0]
    out = model.graph.output[0].name
    got = prepare(model, feed).run(feed)[out]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    q = prepare(model, feed, options={"quantize": True,
                                      "calibrate": lambda g: collect_ranges(g, [{"input": s} for s in samples])})
    assert not any(op.type == "FakeQuantize" for op in q.graph.net.op)
    got = q.run(feed)[out]
    cos = float(got.ravel() @ want.ravel() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos > 0.99, cos


def test_other_microsoft_ops_are_refused_by_name():
    node = helper.make_node("QLinearReduceMean", ["x", "s", "z", "s", "z"], ["y"], domain=MS)
    model = _model([node], {"s": np.array(0.1, np.float32), "z": np.array(0, np.uint8)},
                   {"x": [2, 2]}, {"y": [2, 2]})
    with pytest.raises(UnsupportedOpError, match="QLinearReduceMean"):
        prepare(model, {"x": np.zeros((2, 2), np.float32)})


def test_qgemm_with_alpha_and_a_bias_is_refused_by_name():
    inits = {**_grid("a", 0.1, 10), "w": np.ones((3, 2), np.int8), "w_s": np.array(0.1, np.float32),
             "w_z": np.array(0, np.int8), "c": np.zeros(2, np.int32)}
    node = helper.make_node("QGemm", ["aq", "a_s", "a_z", "w", "w_s", "w_z", "c"], ["y"], domain=MS,
                            alpha=0.5, name="head")
    nodes = [helper.make_node("QuantizeLinear", ["x", "a_s", "a_z"], ["aq"]), node]
    model = _model(nodes, inits, {"x": [1, 3]}, {"y": [1, 2]})
    with pytest.raises(Exception, match="QGemm 'head': alpha other than 1"):
        prepare(model, {"x": np.zeros((1, 3), np.float32)})
