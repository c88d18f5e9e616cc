"""docs/tflite.md names every TFLite op the frontend maps; the example builds, converts and
validates against LiteRT through the CLI."""
import hashlib
import re
from pathlib import Path

from mace.frontends.tflite.registry import load_mappers
from tests.cli_helpers import convert_and_validate, make_example, only_checksums_differ

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "tflite"


def test_every_mapped_op_is_documented():
    text = (ROOT / "docs" / "tflite.md").read_text()
    missing = sorted(op for op in load_mappers() if not re.search(rf"\b{op}\b", text))
    assert not missing, f"docs/tflite.md does not mention {missing}"


def test_example_deployment_file_loads():
    from mace.config.deployment import load_deployment

    config = load_deployment(EXAMPLE / "mobilenet_v2.yml")
    assert {m.platform for m in config.models.values()} == {"tflite"} and not config.warnings
    assert config.models["mobilenet_v2_int8"].subgraphs[0].input_tensors == ["serving_default_image:0"]


def test_example_builds_converts_and_validates(tmp_path):
    import tests.tflite.tfl_case  # noqa: F401  (skips without tensorflow, tflite, LiteRT)

    work, printed = make_example("tflite", tmp_path)
    # TensorFlow writes other bytes on other CPUs: the script pins what it wrote here into the
    # .yml, that value and nothing else (comments kept), and says so
    yml = work / "mobilenet_v2.yml"
    text, shipped = yml.read_text(), (EXAMPLE / "mobilenet_v2.yml").read_text()
    for kind in ("float", "int8"):
        digest = hashlib.sha256((work / f"mobilenet_v2_{kind}.tflite").read_bytes()).hexdigest()
        assert f"model_sha256_checksum: {digest}  # written by make_model.py" in text
        assert f"models.mobilenet_v2_{kind}.model_sha256_checksum: " in printed
    assert only_checksums_differ(text, shipped)
    convert_and_validate(yml, tmp_path)
