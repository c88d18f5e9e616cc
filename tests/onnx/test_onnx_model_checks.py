"""What the ONNX frontend refuses before converting, and what it must not (issue 34 item 5):
IR 3 models whose initializers are not graph inputs run in onnxruntime and convert here; a
sequence-typed graph input is a refusal naming it, not a numpy error."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mace.errors import ModelError
from mace.onnx_backend import prepare
from mace.testing.onnx_models import data_input, randomized


@pytest.mark.parametrize("name", ["inception_v1", "inception_v2", "densenet121"])
def test_ir3_light_models_with_unlisted_initializers_convert(name):
    """onnx's own light models, weights made initializers, IR version 3 kept (they were refused
    as "invalid ONNX model (onnxruntime would refuse it too)"; onnxruntime runs them)."""
    model = randomized(name)
    model.ir_version = 3
    inits = {i.name for i in model.graph.initializer}
    assert inits and not inits & {i.name for i in model.graph.input}
    input_name, shape = data_input(model)
    x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {input_name: x})[0]
    got = prepare(model, {input_name: x}).run({input_name: x})[model.graph.output[0].name]
    cos = float(got.ravel() @ want.ravel() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos > 0.99999, cos
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


def test_invalid_model_message_claims_nothing_about_onnxruntime():
    node = helper.make_node("Softmax", ["x"], ["y"], axis=5)   # out of range for rank 2
    graph = helper.make_graph([node], "bad", [helper.make_tensor_value_info("x", 1, [2, 3])],
                              [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ModelError) as e:
        prepare(model, {"x": np.zeros((2, 3), np.float32)})
    assert "onnx's strict shape inference" in str(e.value) and "onnxruntime" not in str(e.value)


def _sequence_model():
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [None, 3])
    graph = helper.make_graph([helper.make_node("SequenceAt", ["s", "i"], ["y"])], "seq",
                              [seq, helper.make_tensor_value_info("i", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("value", [[np.zeros((2, 3), np.float32), np.zeros((1, 3), np.float32)],
                                   np.zeros((2, 2, 3), np.float32)])
def test_sequence_input_is_a_clear_refusal(value):
    with pytest.raises(ModelError, match="'s' is a (list|sequence).*only tensor inputs"):
        prepare(_sequence_model(), {"s": value, "i": np.array(0)})
