"""`platform: keras` (MACE's name for Keras files) converts with the TensorFlow frontend and
validates against TensorFlow, through the CLI."""
from __future__ import annotations

import pytest

from tests.cli_helpers import cli, sha256, write_deployment


def test_keras_platform_converts_and_validates(tmp_path):
    keras = pytest.importorskip("keras", reason="Keras (tensorflow extra) is needed to write the model")
    inp = keras.Input((8, 8, 1), batch_size=1, name="image")
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inp)
    x = keras.layers.Flatten()(x)
    out = keras.layers.Dense(10, activation="softmax", name="prob")(x)
    keras.Model(inp, out).save(tmp_path / "small.keras")
    model = {"platform": "keras", "model_file_path": "small.keras",
             "model_sha256_checksum": sha256(tmp_path / "small.keras"),
             # the frozen Keras graph names its output Identity (docs/tensorflow.md)
             "subgraphs": [{"input_tensors": "image", "input_shapes": "1,8,8,1", "output_tensors": "Identity",
                            "output_shapes": "1,10", "output_data_formats": "NONE"}]}
    write_deployment(tmp_path / "k.yml", {"small": model}, library="keras_lib")
    r = cli("convert", "--config=k.yml", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    r = cli("run", "--config=k.yml", "--validate", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Similarity test passed" in r.stdout
