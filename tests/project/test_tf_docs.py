"""docs/tensorflow.md names every TensorFlow op the frontend maps; the example deployment file
loads (no TensorFlow needed); the example builds, converts and validates (with TensorFlow)."""
import hashlib
from pathlib import Path

import pytest

from mace.frontends.tensorflow.registry import load_mappers
from tests.cli_helpers import convert_and_validate, make_example, only_checksums_differ

ROOT = Path(__file__).resolve().parents[2]


def test_every_mapped_op_is_documented():
    text = (ROOT / "docs" / "tensorflow.md").read_text()
    missing = sorted(op for op in load_mappers() if f"`{op}`" not in text)
    assert not missing, f"docs/tensorflow.md does not mention {missing}"


def test_example_deployment_file_loads():
    from mace.config.deployment import load_deployment

    config = load_deployment(ROOT / "examples" / "tensorflow" / "mobilenet_v2.yml")
    model = config.models["mobilenet_v2"]
    assert model.platform == "tensorflow" and not config.warnings
    assert model.subgraphs[0].output_tensors == ["MobilenetV2/Predictions/Reshape_1"]


def test_example_builds_pins_its_checksum_converts_and_validates(tmp_path):
    """make_model.py writes the graph and its sha256 into the .yml (that value only: the bytes
    are this machine's TensorFlow's), and the CLI converts and validates it against TensorFlow."""
    pytest.importorskip("tensorflow", reason="the TensorFlow example needs the [tf] extra")
    example = ROOT / "examples" / "tensorflow"
    work, printed = make_example("tensorflow", tmp_path)
    yml = work / "mobilenet_v2.yml"
    text, shipped = yml.read_text(), (example / "mobilenet_v2.yml").read_text()
    digest = hashlib.sha256((work / "mobilenet_v2.pb").read_bytes()).hexdigest()
    assert f"model_sha256_checksum: {digest}  # written by make_model.py" in text
    assert "mobilenet_v2.yml: models.mobilenet_v2.model_sha256_checksum: " in printed
    assert only_checksums_differ(text, shipped)
    convert_and_validate(yml, tmp_path)
