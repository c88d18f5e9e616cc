"""pin_checksum: a generator writes the sha256 of the file it made into the deployment file that
names it, rewriting that one value and nothing else."""
import hashlib
import os

import pytest
import yaml

from mace.config.pin_checksum import pin_checksum
from mace.errors import ConfigError

OLD = "a" * 64
DEPLOY = f"""\
# header comment: kept
library_name: lib
models:
  float_model:
    platform: tflite
    model_file_path: examples/x/float.tflite    # the path, then a comment
    model_sha256_checksum: {OLD}  # as another machine wrote it
    runtime: cpu
  int8_model:
    platform: tflite
    model_file_path: examples/x/int8.tflite
    model_sha256_checksum: {OLD}
"""


def write(tmp_path, text=DEPLOY, data=b"float bytes"):
    folder = tmp_path / "examples" / "x"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "float.tflite").write_bytes(data)
    (folder / "deploy.yml").write_text(text)
    return folder / "deploy.yml", folder / "float.tflite", hashlib.sha256(data).hexdigest()


def test_rewrites_only_the_checksum_of_the_model_that_names_the_file(tmp_path):
    yml, model, digest = write(tmp_path)
    (pinned,) = pin_checksum(yml, model)
    assert (pinned.key_path, pinned.old, pinned.new, pinned.changed) == \
        ("models.float_model.model_sha256_checksum", OLD, digest, True)
    assert pinned.describe("made here") == f"models.float_model.model_sha256_checksum: {OLD} -> {digest} (made here)"
    # the same text, comments included, but for that one value
    assert yml.read_text() == DEPLOY.replace(f"{OLD}  # as another", f"{digest}  # as another")
    data = yaml.safe_load(yml.read_text())["models"]
    assert data["float_model"]["model_sha256_checksum"] == digest
    assert data["int8_model"]["model_sha256_checksum"] == OLD


def test_the_same_checksum_leaves_the_file_alone(tmp_path):
    yml, model, digest = write(tmp_path, DEPLOY.replace(f"{OLD}  #", f"{'b' * 64}  #"))
    pin_checksum(yml, model)
    before = yml.stat().st_mtime_ns
    os.utime(yml, ns=(before - 10**9, before - 10**9))
    (pinned,) = pin_checksum(yml, model)
    assert not pinned.changed and pinned.describe("x").endswith("(unchanged: the same bytes as before)")
    assert yml.stat().st_mtime_ns == before - 10**9   # not rewritten


def test_a_file_no_model_names_changes_nothing(tmp_path):
    yml, _, _ = write(tmp_path)
    other = tmp_path / "elsewhere" / "float.tflite"   # same name, other folder: not the .yml's file
    other.parent.mkdir()
    other.write_bytes(b"x")
    assert pin_checksum(yml, other) == []
    with pytest.raises(ConfigError, match="no model has a model_file_path or weight_file_path naming"):
        pin_checksum(yml, other, required=True)
    assert yml.read_text() == DEPLOY


def test_weight_file_quoted_values_absolute_paths_and_a_missing_key(tmp_path):
    proto, weights = tmp_path / "net.prototxt", tmp_path / "net.caffemodel"
    proto.write_text("name: 'n'\n")
    weights.write_bytes(b"\0blobs")
    text = (f"models:\n  net:\n    platform: caffe\n    model_file_path: ./net.prototxt\n"
            f"    weight_file_path: '{weights}'\n    weight_sha256_checksum: \"{OLD}\"\n    runtime: cpu\n")
    yml = tmp_path / "deploy.yml"
    yml.write_text(text)
    (w,) = pin_checksum(yml, weights)
    assert w.key_path == "models.net.weight_sha256_checksum" and w.old == OLD
    (m,) = pin_checksum(yml, proto)   # no model_sha256_checksum yet: added under the path
    assert m.old is None and m.describe().endswith(f"(missing) -> {m.new}")
    lines = yml.read_text().splitlines()
    assert lines[3:6] == ["    model_file_path: ./net.prototxt", f"    model_sha256_checksum: {m.new}",
                          f"    weight_file_path: '{weights}'"]
    assert lines[6] == f"    weight_sha256_checksum: {w.new}"
    assert yaml.safe_load(yml.read_text())["models"]["net"]["runtime"] == "cpu"


def test_a_flow_mapping_without_the_key_is_refused(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    yml = tmp_path / "deploy.yml"
    yml.write_text("models: {m: {platform: onnx, model_file_path: m.onnx}}\n")
    with pytest.raises(ConfigError, match="models.m: add model_sha256_checksum"):
        pin_checksum(yml, tmp_path / "m.onnx")
    yml.write_text(f"models: {{m: {{model_file_path: m.onnx, model_sha256_checksum: {OLD}}}}}\n")
    (pinned,) = pin_checksum(yml, tmp_path / "m.onnx")
    assert yaml.safe_load(yml.read_text())["models"]["m"]["model_sha256_checksum"] == pinned.new
