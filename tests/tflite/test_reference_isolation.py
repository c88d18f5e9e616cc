"""Issue 38: the validation reference (LiteRT, onnxruntime) runs in a child process, so that its
native crash is one error naming the framework, the signal and the model, never the end of our
process (mace/validate/isolated.py). The crash is LiteRT's own: an int8 model whose quantize
output has scale 0 segfaults it, once the child is told to skip the check that refuses such a
model (MACE_TEST_UNCHECKED_REFERENCE, a test hook); MACE_TEST_REFERENCE_CRASH kills the child
with a signal for frameworks we have no crashing model for."""
import struct
from pathlib import Path

import numpy as np
import pytest

from mace.errors import ModelError
from mace.validate import isolated
from mace.validate.isolated import CRASH_ENV, UNCHECKED_ENV
from mace.validate.reference import run_litert, run_litert_sequence, run_onnxruntime
from tests.cli_helpers import cli, workdir

CORPUS = Path(__file__).resolve().parents[1] / "fuzz" / "corpus"
X = {"x0": np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 4, 4, 2)}


@pytest.fixture
def zero_scale_model(tmp_path):
    """The fuzz corpus's int8 conv (float in, quantize, conv, relu, dequantize) with the quantize
    output's scale set to 0: LiteRT segfaults in its quantize kernel."""
    tflite = pytest.importorskip("tflite", reason="the TFLite reader needs the tflite package")
    pytest.importorskip("ai_edge_litert", reason="LiteRT is the reference")
    buf = bytearray((CORPUS / "model_int8.tflite").read_bytes())
    sg = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)
    index = next(i for i in range(sg.TensorsLength()) if sg.Tensors(i).Name() == b"tfl.quantize")
    q = sg.Tensors(index).Quantization()
    at = q._tab.Vector(q._tab.Offset(8))     # QuantizationParameters.scale (float32 vector)
    buf[at:at + 4] = struct.pack("<f", 0.0)
    path = tmp_path / "zero_scale.tflite"
    path.write_bytes(bytes(buf))
    return path


def test_a_litert_segfault_is_an_error_naming_it_and_we_go_on(zero_scale_model, monkeypatch):
    monkeypatch.setenv(UNCHECKED_ENV, "1")
    with pytest.raises(ModelError, match=r"LiteRT crashed \(SIGSEGV\) running .*zero_scale.tflite; "
                                         r"our own run is unaffected"):
        run_litert(zero_scale_model, X, ["Identity"])
    monkeypatch.delenv(UNCHECKED_ENV)
    with pytest.raises(ModelError, match=r"zero_scale.tflite: tensor 'tfl.quantize' has quantization scale \[0.0\]"):
        run_litert(zero_scale_model, X, ["Identity"])   # what convert and validation say without the hook
    out = run_litert(CORPUS / "model_int8.tflite", X, ["Identity"])["Identity"]   # this process is fine
    assert out.shape == (1, 4, 4, 4) and np.isfinite(out).all()


def test_litert_sequence_runs_in_one_child_with_the_results_of_an_in_process_run(monkeypatch):
    pytest.importorskip("ai_edge_litert", reason="LiteRT is the reference")
    from mace.validate.reference import litert_sequence_here

    calls = []
    real = isolated.subprocess.run
    monkeypatch.setattr(isolated.subprocess, "run", lambda *a, **k: calls.append(a) or real(*a, **k))
    rng = np.random.default_rng(3)
    sequence = [{"x0": rng.normal(size=(1, 4, 4, 2)).astype(np.float32)} for _ in range(3)]
    names = ["Identity", "tfl.quantize"]
    got = run_litert_sequence(CORPUS / "model_int8.tflite", sequence, names, integer_outputs=["tfl.quantize"])
    assert len(calls) == 1   # one child per validation, not one per step
    want = litert_sequence_here(CORPUS / "model_int8.tflite", sequence, names, integer_outputs=["tfl.quantize"])
    for g, w in zip(got, want):
        assert list(g) == names and g["tfl.quantize"].dtype == np.int8
        for name in names:
            np.testing.assert_array_equal(g[name], w[name])


def test_an_onnxruntime_crash_is_an_error_naming_it(monkeypatch):
    pytest.importorskip("onnxruntime", reason="onnxruntime is the ONNX reference")
    image = {"image": np.zeros((1, 1, 8, 8), np.float32)}
    assert run_onnxruntime(CORPUS / "model.onnx", image, ["prob"])["prob"].shape == (1, 10)
    monkeypatch.setenv(CRASH_ENV, "SIGABRT")
    with pytest.raises(ModelError, match=r"^onnxruntime crashed \(SIGABRT\) running .*model.onnx; "
                                         r"our own run is unaffected"):
        run_onnxruntime(CORPUS / "model.onnx", image, ["prob"])


def test_run_validate_reports_the_crash_as_one_error(tmp_path):
    """Through the CLI: exit 1, one error line, no traceback."""
    import os

    work = workdir(tmp_path)
    assert cli("convert", "--config", "deploy.yml", cwd=work).returncode == 0
    r = cli("run", "--config", "deploy.yml", "--validate", cwd=work, env=dict(os.environ, **{CRASH_ENV: "SIGSEGV"}))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "error: onnxruntime crashed (SIGSEGV) running digits/digits_cnn.onnx; our own run is unaffected" \
        in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
