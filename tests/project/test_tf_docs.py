"""docs/tensorflow.md names every TensorFlow op the frontend maps; the example deployment file
loads (no TensorFlow needed)."""
from pathlib import Path

from mace.frontends.tensorflow.registry import load_mappers

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
