"""Whole TensorFlow networks end to end through the CLI: `convert`, then `run --validate`
against TensorFlow at the CPU threshold (0.999).

Keras MobileNet v1 / v2, ResNet-50 and a DeepLab-style dilated-conv segmentation net
(seeded random weights) are frozen to GraphDef .pb files once per module; a small
Keras model also goes through as .h5, .keras and a SavedModel directory.
"""
import hashlib
import json

import numpy as np
import pytest
import yaml

from tests.cli_helpers import cli
from tests.tensorflow.keras_nets import NETWORKS, L, build, freeze_keras, keras, softmax_input

SIZE = "1,96,96,3"
# Keras' own numpy calls warn under numpy 2; nothing of ours.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def net_entry(pb_name, data, graph_def, output_shape):
    logits = softmax_input(graph_def)
    fmt = "NHWC" if len(output_shape) == 4 else "NONE"
    return {"platform": "tensorflow", "model_file_path": pb_name, "model_sha256_checksum": sha256(data),
            "subgraphs": [{"input_tensors": "input", "input_shapes": SIZE,
                           # the probabilities (named with ':0') and the logits (without)
                           "output_tensors": ["Identity:0", logits],
                           "output_shapes": [",".join(map(str, output_shape))] * 2,
                           "output_data_formats": fmt}],
            "runtime": "cpu"}


def run_cli(work, cfg):
    conv = cli("convert", f"--config={cfg}", cwd=work, timeout=600)
    assert conv.returncode == 0, conv.stdout + conv.stderr
    report = work / "report.json"
    run = cli("run", f"--config={cfg}", "--validate", f"--json={report}", cwd=work, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return conv, run, {m["model"]: m for m in json.loads(report.read_text())["models"]}


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    work = tmp_path_factory.mktemp("tfnets")
    models = {}
    for name in NETWORKS:
        model = build(name)
        graph_def = freeze_keras(model)
        data = graph_def.SerializeToString(deterministic=True)
        (work / f"{name}.pb").write_bytes(data)
        models[name] = net_entry(f"{name}.pb", data, graph_def, (1,) + tuple(model.outputs[0].shape[1:]))
    cfg = work / "nets.yml"
    cfg.write_text(yaml.safe_dump({"library_name": "tfnets", "target_abis": ["host"], "models": models},
                                  sort_keys=False))
    return run_cli(work, cfg)


@pytest.mark.parametrize("name", list(NETWORKS))
def test_network_validates_against_tensorflow(networks, name):
    conv, run, report = networks
    assert f"Model {name} converted" in conv.stdout
    metrics = report[name]["validation"]
    assert len(metrics) == 2
    for m in metrics:
        assert m["passed"] and m["cosine"] >= 0.999, m
        assert m["pixel_accuracy"] == 1.0, m


def small_keras_model():
    keras.utils.set_random_seed(1)
    inp = keras.Input((24, 24, 3), name="image")
    x = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = L.DepthwiseConv2D(3, dilation_rate=2, padding="same")(x)
    x = L.BatchNormalization()(x)
    x = L.Conv2DTranspose(4, 3, strides=2, padding="same")(x)
    x = L.MaxPooling2D()(L.ReLU(6.0)(x))
    logits = L.Dense(5)(L.Flatten()(x))
    return keras.Model(inp, [L.Softmax()(logits), x])


@pytest.fixture(scope="module")
def keras_files(tmp_path_factory):
    from mace.config.fetch import sha256_of

    work = tmp_path_factory.mktemp("keras")
    model = small_keras_model()
    model.save(work / "small.h5")
    model.save(work / "small.keras")
    model.export(str(work / "small_savedmodel"), verbose=False)
    models = {}
    for key, path in (("from_h5", "small.h5"), ("from_keras", "small.keras"),
                      ("from_savedmodel", "small_savedmodel")):
        models[key] = {
            "platform": "tensorflow", "model_file_path": path,
            "model_sha256_checksum": sha256_of(work / path),
            "subgraphs": [{"input_tensors": "image:0", "input_shapes": "1,3,24,24",
                           "input_data_formats": "NCHW",
                           "output_tensors": ["Identity", "Identity_1:0"],
                           "output_shapes": ["1,5", "1,4,24,24"], "output_data_formats": ["NONE", "NCHW"]}],
            "runtime": "cpu"}
    cfg = work / "keras.yml"
    cfg.write_text(yaml.safe_dump({"library_name": "kerasfiles", "models": models}, sort_keys=False))
    return run_cli(work, cfg), model, work


@pytest.mark.parametrize("key", ["from_h5", "from_keras", "from_savedmodel"])
def test_keras_file_and_saved_model(keras_files, key):
    (_, _, report), _, _ = keras_files
    metrics = report[key]["validation"]
    assert [m["name"] for m in metrics] == ["Identity", "Identity_1:0"]
    assert all(m["passed"] and m["cosine"] >= 0.999 for m in metrics), metrics


def test_keras_outputs_match_keras_itself(keras_files):
    """The frozen graph computes what the Keras model does (NCHW in, NCHW out here)."""
    _, model, work = keras_files
    x = np.random.default_rng(4).uniform(-1, 1, (1, 3, 24, 24)).astype(np.float32)
    np.save(work / "image_0.npy", x)
    out = work / "out"
    run = cli("run", f"--config={work / 'keras.yml'}", "--model_name=from_h5", f"--input_dir={work}",
              f"--output_dir={out}", cwd=work)
    assert run.returncode == 0, run.stdout + run.stderr
    prob, feat = model(x.transpose(0, 2, 3, 1), training=False)
    np.testing.assert_allclose(np.load(out / "Identity.npy"), prob.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.load(out / "Identity_1_0.npy"), feat.numpy().transpose(0, 3, 1, 2),
                               rtol=1e-4, atol=1e-5)
