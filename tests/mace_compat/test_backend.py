"""MACE's `backend:` honoured: an ONNX model whose entry says `backend: tensorflow` and names the
Keras file it came from is validated against that file in TensorFlow, through the real CLI.
The ONNX file is the same network written by hand (Conv 3x3 + Relu, the Keras weights
transposed HWIO -> OIHW), so a right reference passes and a wrong original fails."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import yaml
from onnx import helper, numpy_helper

from mace.config import load_deployment
from mace.errors import ConfigError
from mace.util.invocation import install_hint
from mace.validate import original
from tests.cli_helpers import cli, save_onnx, sha256

keras = pytest.importorskip("keras", reason="the original model is a Keras file (the tf extra)")


def _keras(path, seed):
    inp = keras.Input((6, 6, 3), name="x", batch_size=1)
    out = keras.layers.Conv2D(4, 3, padding="same", activation="relu", name="conv")(inp)
    m = keras.Model(inp, out)
    rng = np.random.default_rng(seed)
    kernel, bias = (rng.uniform(-1, 1, w.shape).astype(np.float32) for w in m.get_layer("conv").get_weights())
    m.get_layer("conv").set_weights([kernel, bias])
    m.save(path)
    return kernel, bias


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    w = tmp_path_factory.mktemp("backend")
    kernel, bias = _keras(w / "net.keras", seed=1)
    _keras(w / "other.keras", seed=2)    # same shapes, other weights: a wrong original
    onnx_sha = save_onnx(w / "net.onnx",
                         [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                          helper.make_node("Relu", ["c"], ["y"])],
                         [("x", [1, 3, 6, 6])], [("y", [1, 4, 6, 6])],
                         [numpy_helper.from_array(kernel.transpose(3, 2, 0, 1).copy(), "w"),
                          numpy_helper.from_array(bias, "b")])
    return w, onnx_sha


def _deploy(w, onnx_sha, name="deploy.yml", **model):
    entry = {"platform": "onnx", "model_file_path": "net.onnx", "model_sha256_checksum": onnx_sha,
             "subgraphs": [{"input_tensors": "x", "input_shapes": "1,6,6,3", "input_data_formats": "NHWC",
                            "output_tensors": "y", "output_shapes": "1,6,6,4", "output_data_formats": "NHWC",
                            "original_output_tensors": "Identity"}], **model}
    (w / name).write_text(yaml.safe_dump({"library_name": "net", "models": {"net": entry}}, sort_keys=False))
    return name


def test_validated_against_the_keras_original(work):
    w, onnx_sha = work
    config = _deploy(w, onnx_sha, backend="tensorflow", original_model_file_path="net.keras",
                     original_model_sha256_checksum=sha256(w / "net.keras"))
    assert cli("convert", f"--config={config}", cwd=w).returncode == 0
    r = cli("run", f"--config={config}", "--validate", cwd=w, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "validated against the original model net.keras in TensorFlow" in r.stdout
    assert "Similarity test passed" in r.stdout


def test_a_wrong_original_fails_validation(work):
    w, onnx_sha = work
    config = _deploy(w, onnx_sha, "other.yml", backend="tensorflow", original_model_file_path="other.keras",
                     original_model_sha256_checksum=sha256(w / "other.keras"))
    assert cli("convert", f"--config={config}", cwd=w).returncode == 0
    r = cli("run", f"--config={config}", "--validate", cwd=w, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "other.keras in TensorFlow" in r.stdout and "similarity below threshold for output(s): y" in r.stderr


def test_missing_original_is_one_clear_error(work):
    w, onnx_sha = work
    config = _deploy(w, onnx_sha, "missing.yml", backend="tensorflow", original_model_file_path="gone.keras",
                     original_model_sha256_checksum="0" * 64)
    assert cli("convert", f"--config={config}", cwd=w).returncode == 0
    r = cli("run", f"--config={config}", "--validate", cwd=w, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "models.net.original_model_file_path: file not found: gone.keras" in r.stderr


def _plan(w, onnx_sha, **model):
    config = load_deployment(w / _deploy(w, onnx_sha, "plan.yml", **model))
    m = config.models["net"]
    return original.plan(m, m.graph)


def test_notes_say_why_the_original_cannot_run(work, monkeypatch):
    w, onnx_sha = work
    assert "no original_model_file_path given" in _plan(w, onnx_sha, backend="tensorflow")[1]
    platform, note = _plan(w, onnx_sha, backend="pytorch", original_model_file_path="net.pt")
    assert platform is None and "no PyTorch reference in this release" in note
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorflow" else real(name, *a))
    platform, note = _plan(w, onnx_sha, backend="keras", original_model_file_path="net.keras")
    assert platform is None and f"TensorFlow is not installed ({install_hint('tf')})" in note
    assert _plan(w, onnx_sha)[1] is None     # the default: onnxruntime, nothing to say


def test_config_shows_the_plan_and_refuses_an_original_on_other_platforms(work):
    w, onnx_sha = work
    config = _deploy(w, onnx_sha, "shown.yml", backend="tensorflow", original_model_file_path="net.keras",
                     original_model_sha256_checksum=sha256(w / "net.keras"))
    r = cli("config", f"--config={config}", cwd=w)
    assert r.returncode == 0 and "validated against the original model net.keras" in r.stdout
    (w / "tfl.yml").write_text((w / config).read_text().replace("platform: onnx", "platform: tflite"))
    with pytest.raises(ConfigError, match="original_model_file_path: only for ONNX models"):
        load_deployment(w / "tfl.yml")


def test_validated_against_a_tflite_original(work):
    """Issue 38: `backend: tflite` with original_model_file_path (documented) was an internal error
    (KeyError: 'tflite') before any reference ran."""
    pytest.importorskip("ai_edge_litert", reason="LiteRT runs the .tflite original (the tflite extra)")
    import tensorflow as tf

    w, onnx_sha = work
    (w / "net.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(
        keras.models.load_model(w / "net.keras")).convert())
    model = dict(backend="tflite", original_model_file_path="net.tflite",
                 original_model_sha256_checksum=sha256(w / "net.tflite"))
    config = _deploy(w, onnx_sha, "tfl_named.yml", **model)
    assert cli("convert", f"--config={config}", cwd=w).returncode == 0
    r = cli("run", f"--config={config}", "--validate", cwd=w)
    assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr
    assert "net.tflite: tensor 'x' is not in the TFLite model" in r.stderr, r.stderr   # names needed
    from mace.frontends.tflite.model_file import read_model
    tfl = read_model(w / "net.tflite")
    doc = yaml.safe_load((w / config).read_text())
    doc["models"]["net"]["subgraphs"][0].update(original_input_tensors=tfl.tensors[tfl.inputs[0]].name,
                                                original_output_tensors=tfl.tensors[tfl.outputs[0]].name)
    (w / config).write_text(yaml.safe_dump(doc, sort_keys=False))
    r = cli("run", f"--config={config}", "--validate", cwd=w)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
