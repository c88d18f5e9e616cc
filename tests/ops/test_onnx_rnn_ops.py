"""ONNX LSTM and GRU against onnxruntime on hand-built cases (issue 22: tf2onnx's and
torch.onnx's recurrent layers): every direction, both layouts, omitted and given optional
inputs and outputs, peepholes, clip, GRU's linear_before_reset; what is refused."""
import numpy as np
import pytest

from mace import onnx_backend
from mace.errors import ModelError
from tests.ops.onnx_case import make_model, rand, run_ort
from tests.ops.onnx_graph import IR_VERSION, check_op, op_types

SEQ, BATCH, INP, HID = 5, 2, 3, 4
DIRS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _weights(op, direction, gates, seed=1):
    d = DIRS[direction]
    return {"W": rand(d, gates * HID, INP, seed=seed), "R": rand(d, gates * HID, HID, seed=seed + 1),
            "B": rand(d, 2 * gates * HID, seed=seed + 2)}


def _x(layout):
    return rand(*((BATCH, SEQ, INP) if layout else (SEQ, BATCH, INP)), seed=7, low=-2, high=2)


def _state(direction, layout, seed):
    d = DIRS[direction]
    return rand(*((BATCH, d, HID) if layout else (d, BATCH, HID)), seed=seed)


def check_rnn(op_type, inputs, weights, attrs, n_outputs, order):
    """check_op, but layout 1 (batch first), which onnxruntime's CPU kernels refuse, is checked
    against onnxruntime on the layout-0 model: ONNX defines layout 1 as that model with X and the
    states' first two axes swapped, and Y's axes (seq, dirs, batch) as (batch, seq, dirs)."""
    if not attrs.get("layout"):
        return check_op(op_type, inputs, weights, attrs, n_outputs=n_outputs, opset=14,
                        input_order=order)
    seq_major = {k: v.transpose(1, 0, 2) for k, v in inputs.items()}
    ref = make_model(op_type, seq_major, weights, {**attrs, "layout": 0}, n_outputs, 14, order)
    ref.ir_version = min(ref.ir_version, IR_VERSION)
    expected = run_ort(ref, seq_major)
    expected = [expected[0].transpose(2, 0, 1, 3)] + [e.transpose(1, 0, 2) for e in expected[1:]]
    model = make_model(op_type, inputs, weights, attrs, n_outputs, 14, order)
    engine = onnx_backend.prepare(model, inputs)
    result = engine.run(inputs)
    for i, (name, e) in enumerate(zip(engine.graph.output_names, expected)):
        assert result[name].shape == e.shape, f"output {i}: {result[name].shape} != {e.shape}"
        np.testing.assert_allclose(result[name], e, rtol=1e-4, atol=1e-5, err_msg=f"output {i}")
    return engine


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_with_initial_states(direction, layout):
    w = _weights("LSTM", direction, 4)
    engine = check_rnn("LSTM", {"x": _x(layout), "h0": _state(direction, layout, 3),
                                "c0": _state(direction, layout, 4)},
                       w, {"hidden_size": HID, "direction": direction, "layout": layout},
                       3, ["x", "W", "R", "B", "", "h0", "c0"])
    assert "LSTM" in op_types(engine)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_without_bias_or_states(direction):
    w = _weights("LSTM", direction, 4)
    del w["B"]
    check_op("LSTM", {"x": _x(0)}, w, {"hidden_size": HID, "direction": direction}, n_outputs=3)


def test_lstm_only_y_h_as_output_and_the_default_activations_spelled_out():
    """tf2onnx reads Y_h only at times; activations given explicitly equal to the defaults."""
    w = _weights("LSTM", "bidirectional", 4)
    model = make_model("LSTM", {"x": _x(0)}, w,
                       {"hidden_size": HID, "direction": "bidirectional",
                        "activations": ["Sigmoid", "Tanh", "Tanh"] * 2}, n_outputs=2)
    model.graph.node[0].output[0] = ""
    del model.graph.output[0]
    model.graph.output[0].name = "y1"
    from tests.ops.onnx_graph import check_model
    check_model(model, {"x": _x(0)})


def test_lstm_peepholes_and_clip():
    w = _weights("LSTM", "forward", 4)
    w["P"] = rand(1, 3 * HID, seed=9)
    check_op("LSTM", {"x": _x(0)}, w, {"hidden_size": HID, "clip": 0.7}, n_outputs=3,
             input_order=["x", "W", "R", "B", "", "", "", "P"])


def test_lstm_full_sequence_lens_is_taken():
    w = _weights("LSTM", "forward", 4)
    w["lens"] = np.full(BATCH, SEQ, np.int32)
    check_op("LSTM", {"x": _x(0)}, w, {"hidden_size": HID}, n_outputs=3,
             input_order=["x", "W", "R", "B", "lens"])


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gru(direction, layout, linear_before_reset):
    w = _weights("GRU", direction, 3)
    engine = check_rnn("GRU", {"x": _x(layout), "h0": _state(direction, layout, 3)}, w,
                       {"hidden_size": HID, "direction": direction, "layout": layout,
                        "linear_before_reset": linear_before_reset},
                       2, ["x", "W", "R", "B", "", "h0"])
    assert "GRU" in op_types(engine)


def test_gru_clip_without_bias():
    w = _weights("GRU", "forward", 3)
    del w["B"]
    check_op("GRU", {"x": _x(0)}, w, {"hidden_size": HID, "clip": 0.5}, n_outputs=2)


@pytest.mark.parametrize("attrs, inputs, match", [
    ({"activations": ["Relu", "Tanh", "Tanh"]}, {}, r"LSTM 'LSTM_y0': activations \['relu', 'tanh', "
                                                    r"'tanh'\] are not supported"),
    ({"input_forget": 1}, {}, r"LSTM 'LSTM_y0': input_forget=1"),
    ({}, {"lens": np.array([SEQ, 3], np.int32)}, r"LSTM 'LSTM_y0': sequence_lens \(input 'lens'\) "
                                                 r"must be the constant full length 5"),
])
def test_lstm_refusals_name_the_node(attrs, inputs, match):
    w = _weights("LSTM", "forward", 4)
    w.update(inputs)
    order = ["x", "W", "R", "B"] + (["lens"] if inputs else [])
    model = make_model("LSTM", {"x": _x(0)}, w, {"hidden_size": HID, **attrs}, n_outputs=3,
                       input_order=order)
    with pytest.raises(ModelError, match=match):
        onnx_backend.prepare(model, {"x": _x(0)})
