"""Audio front-ends as ONNX exports them, against onnxruntime: STFT with a Hann window, the
power spectrum through a MelWeightMatrix, the log; DFT forward/inverse, one- and two-sided."""
import numpy as np
import pytest
from onnx import helper

from mace import onnx_backend
from tests.ops.onnx_case import check, run_ort
from tests.ops.onnx_graph import graph_model

F32, I64 = np.float32, np.int64


def _tone(n=4000, rate=16000):
    t = np.arange(n) / rate
    wave = 0.6 * np.sin(2 * np.pi * 440 * t) + 0.3 * np.sin(2 * np.pi * 1234 * t) * np.exp(-t * 8)
    return wave.astype(F32)


def test_log_mel_spectrogram_against_onnxruntime():
    signal = _tone()[None, :, None]                                          # (1, 4000, 1)
    nodes = [helper.make_node("HannWindow", ["n_fft"], ["window"]),
             helper.make_node("STFT", ["signal", "hop", "window", "n_fft"], ["spec"], onesided=1),
             helper.make_node("ReduceSumSquare", ["spec", "last"], ["power"], keepdims=0),
             helper.make_node("MelWeightMatrix", ["mels", "n_fft", "rate", "lo", "hi"], ["melw"]),
             helper.make_node("MatMul", ["power", "melw"], ["mel"]),
             helper.make_node("Add", ["mel", "eps"], ["mel_eps"]),
             helper.make_node("Log", ["mel_eps"], ["logmel"])]
    consts = {"n_fft": np.array(400, I64), "hop": np.array(160, I64), "last": np.array([-1], I64),
              "mels": np.array(40, I64), "rate": np.array(16000, I64), "lo": np.array(20.0, F32),
              "hi": np.array(7600.0, F32), "eps": np.array(1e-2, F32)}  # a log floor, as audio front-ends use
    model = graph_model(nodes, {"signal": signal}, {"logmel": F32}, consts, opset=18)
    got = onnx_backend.run(model, {"signal": signal})[0]
    want = run_ort(model, {"signal": signal})[0]
    assert got.shape == want.shape == (1, 23, 40)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("inverse,onesided", [(0, 0), (0, 1), (1, 0)])
def test_dft_on_a_signal_axis(inverse, onesided):
    x = np.random.default_rng(0).standard_normal((2, 16, 2 if inverse else 1)).astype(F32)
    check("DFT", {"x": x}, {"len": np.array(16, I64), "axis": np.array(1, I64)},
          {"inverse": inverse, "onesided": onesided}, opset=20, rtol=1e-4, atol=1e-4)
