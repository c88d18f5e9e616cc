"""Caffe SSD detectors: PriorBox, Normalize, DetectionOutput (with NMS), Permute/Flatten heads.

Each op against numbers worked out by hand on tiny cases, against the float64 Caffe
reference (mace/validate/caffe_reference.py) and, where installed, OpenCV's dnn Caffe
importer as a second independent reference; a small SSD through the CLI. Detections are
compared as sets (NMS order may differ), as a user reads them."""
import json
import math

import numpy as np
import pytest

from mace.ops.detection_output import detection_output, max_rows
from mace.ops.normalize import normalize
from mace.ops.prior_box import prior_boxes
from mace.validate.caffe_reference import run_caffe
from mace.validate.metrics import compare, match_detections
from tests.caffe import caffe_zoo
from tests.caffe.caffe_case import check, convert_net, rand
from tests.caffe.caffe_net import CaffeNet, net_from_prototxt
from tests.caffe.test_caffe_networks import cli
from mace.runtime.engine import Engine

SSD_INPUT = [1, 3, 64, 64]


# ---- hand-computed cases ---------------------------------------------------------------------
def _prior_args(**kw):
    a = {"min": [4.0], "max": [], "ratios": [1.0], "clip": False, "variance": [0.1],
         "img": (0, 0), "step": (0.0, 0.0), "offset": 0.5}
    a.update(kw)
    return a


def test_prior_box_by_hand():
    # A 2x2 map on an 8x8 image: cells of 4 px, centres at 2 and 6.
    out = prior_boxes(_prior_args(max=[16.0], ratios=[1.0, 4.0]), (2, 2), (8, 8))
    assert out.shape == (1, 2, 2 * 2 * 3 * 4)
    boxes = out[0, 0].reshape(2, 2, 3, 4)
    np.testing.assert_allclose(boxes[0, 0, 0], [0, 0, 0.5, 0.5])               # min_size 4 square
    np.testing.assert_allclose(boxes[0, 0, 1], [-0.25, -0.25, 0.75, 0.75])     # sqrt(4*16)=8 square
    np.testing.assert_allclose(boxes[0, 0, 2], [-0.25, 0.125, 0.75, 0.375])    # ratio 4: 8 wide, 2 high
    np.testing.assert_allclose(boxes[1, 0, 0], [0, 0.5, 0.5, 1.0])             # row 1: centre y 6
    np.testing.assert_allclose(out[0, 1], 0.1)


def test_prior_box_clip_variance4_and_explicit_step():
    a = _prior_args(clip=True, variance=[0.1, 0.1, 0.2, 0.2], img=(10, 10), step=(5.0, 5.0), offset=0.0)
    out = prior_boxes(a, (2, 2), (99, 99))   # img/step given: the image blob's size is not read
    np.testing.assert_allclose(out[0, 0].reshape(4, 4)[3], [0.3, 0.3, 0.7, 0.7])  # centre (5, 5)
    np.testing.assert_allclose(out[0, 0].reshape(4, 4)[0], [0, 0, 0.2, 0.2])      # clipped at 0
    np.testing.assert_allclose(out[0, 1].reshape(4, 4), [[0.1, 0.1, 0.2, 0.2]] * 4)


def test_normalize_by_hand():
    # Channel 0 holds (3, 4), channel 1 (4, 3): both positions have norm 5.
    x = np.array([3.0, 4.0, 4.0, 3.0], np.float32).reshape(1, 2, 1, 2)
    per_position = normalize(x, [2.0, 10.0], axis=1, across_spatial=False, eps=0.0)
    np.testing.assert_allclose(per_position.reshape(2, 2), [[2 * 3 / 5, 2 * 4 / 5], [10 * 4 / 5, 10 * 3 / 5]])
    whole = normalize(x, [2.0], axis=1, across_spatial=True, eps=0.0)
    np.testing.assert_allclose(whole.reshape(-1), 2 * np.array([3, 4, 4, 3]) / math.sqrt(50))


DET = {"classes": 3, "share": True, "background": 0, "nms": 0.5, "top_k": -1, "eta": 1.0,
       "code": "CORNER", "encoded": False, "keep_top_k": -1, "threshold": 0.1}


def _detect(priors, conf, loc=None, **kw):
    a = dict(DET, **kw)
    priors = np.asarray(priors, np.float64)
    prior = np.stack([priors.reshape(-1), np.full(priors.size, 0.1)])[None]
    loc = np.zeros((1, priors.size)) if loc is None else np.asarray(loc).reshape(1, -1)
    rows = max_rows(a, 1, len(priors))
    return detection_output(a, loc, np.asarray(conf).reshape(1, -1), prior, rows)[0, 0]


def test_detection_output_nms_by_hand():
    # Priors 0 and 1 overlap with IoU 0.81 / (1.19) > 0.5; prior 2 is apart.
    priors = [[0, 0, 0.5, 0.5], [0.05, 0.05, 0.55, 0.55], [0.6, 0.6, 0.9, 0.9]]
    conf = [[0.1, 0.7, 0.2], [0.1, 0.8, 0.1], [0.5, 0.05, 0.45]]  # (prior, class)
    rows = _detect(priors, conf)
    valid = rows[rows[:, 1] >= 0]
    # class 1: prior 1 (0.8) suppresses prior 0 (0.7); prior 2 (0.05) under the threshold.
    # class 2: prior 2 (0.45) and prior 0 (0.2) kept (they do not overlap); prior 1 at 0.1 is not > 0.1.
    np.testing.assert_allclose(valid, [[0, 1, 0.8, 0.05, 0.05, 0.55, 0.55],
                                       [0, 2, 0.45, 0.6, 0.6, 0.9, 0.9],
                                       [0, 2, 0.2, 0, 0, 0.5, 0.5]])
    assert (rows[len(valid):] == -1).all()   # the static tail: -1 rows


def test_detection_output_keep_top_k_and_center_size_decoding():
    priors = [[0.2, 0.2, 0.4, 0.6]]   # centre (0.3, 0.4), 0.2 x 0.4
    loc = [[1.0, -1.0, math.log(2) / 0.1, 0.0]]   # variances 0.1: dx 0.02, dy -0.04, width x2
    rows = _detect(priors, [[0.0, 0.6, 0.9]], loc, code="CENTER_SIZE", keep_top_k=1)
    np.testing.assert_allclose(rows[0], [0, 2, 0.9, 0.3 + 0.02 - 0.2, 0.4 - 0.04 - 0.2,
                                         0.3 + 0.02 + 0.2, 0.4 - 0.04 + 0.2], atol=1e-9)
    assert rows.shape == (1, 7)


def test_detection_output_no_detection_gives_caffes_row():
    rows = _detect([[0, 0, 1, 1]], [[0.9, 0.05, 0.05]])
    np.testing.assert_array_equal(rows[0], [0, -1, -1, -1, -1, -1, -1])


def test_detections_compare_as_sets():
    ref = np.array([[0, 1, 0.9, 0, 0, 0.5, 0.5], [0, 2, 0.8, 0.5, 0.5, 1, 1]]).reshape(1, 1, 2, 7)
    ours = np.full((1, 1, 4, 7), -1.0)
    ours[0, 0, :2] = ref[0, 0, ::-1]
    ours[0, 0, 0, 3] += 1e-6
    assert compare("d", ref, ours, 0.999).cosine > 0.999999
    ours[0, 0, 1, 1] = 3   # a wrong label is a missed and an extra detection
    a, b = match_detections(ref, ours)
    assert len(a) == 3 and compare("d", ref, ours, 0.999).cosine < 0.9


# ---- against the Caffe reference ------------------------------------------------------------
@pytest.mark.parametrize("params", [
    "min_size: 4 max_size: 9 aspect_ratio: 2 aspect_ratio: 3 flip: true clip: true",
    "min_size: 3 min_size: 5 aspect_ratio: 2 flip: false variance: 0.1 variance: 0.1 "
    "variance: 0.2 variance: 0.2",
    "min_size: 6 img_size: 20 step: 5 offset: 0.25",
    "min_size: 6 max_size: 10 img_h: 16 img_w: 24 step_h: 4 step_w: 6",
])
def test_prior_box_against_reference(tmp_path, params):
    net = CaffeNet("pb")
    net.input("data", [1, 3, 16, 24])
    net.conv("feat", "data", cin=3, cout=4, kernel=3, stride=4, pad=1)
    net.layer("PriorBox", "pb", ["feat", "data"], params=f"prior_box_param {{ {params} }}")
    check(tmp_path, net, {"data": rand(1, 3, 16, 24)}, ["pb"], atol=1e-6)


@pytest.mark.parametrize("across,shared", [(False, False), (True, False), (False, True), (True, True)])
def test_normalize_against_reference(tmp_path, across, shared):
    net = CaffeNet("norm")
    net.input("data", [2, 5, 4, 3])
    params = f"norm_param {{ across_spatial: {str(across).lower()} channel_shared: {str(shared).lower()} }}"
    net.layer("Normalize", "norm", ["data"], params=params,
              blobs=[np.linspace(5, 20, 1 if shared else 5, dtype=np.float32)])
    check(tmp_path, net, {"data": rand(2, 5, 4, 3, seed=3)}, ["norm"])


def _ssd_run(tmp_path, text, outputs, seed=5):
    net = net_from_prototxt(text, {"data": SSD_INPUT}, seed=seed)
    x = rand(*SSD_INPUT, seed=11)
    graph, prototxt, caffemodel = convert_net(tmp_path, net, {"data": x}, outputs)
    ours = Engine(graph).run({"data": x})
    ref = run_caffe(prototxt, {"data": x}, outputs, weight_path=caffemodel)
    return x, ours, ref, (prototxt, caffemodel)


@pytest.mark.parametrize("keep_top_k,threshold", [(50, 0.05), (-1, 0.5), (5, 0.99999)])
def test_ssd_detections_match_reference_as_sets(tmp_path, keep_top_k, threshold):
    text = caffe_zoo.ssd(keep_top_k=keep_top_k, threshold=threshold)
    _, ours, ref, _ = _ssd_run(tmp_path, text, ["detection_out", "mbox_priorbox", "conv2_norm"])
    found = ref["detection_out"][0, 0]
    assert (found[:, 1] >= 0).sum() >= 1, "the case should detect something"
    ours_rows = ours["detection_out"][0, 0]
    assert ours_rows.shape[0] >= found.shape[0]
    assert (ours_rows[:, 1] >= 0).sum() == (found[:, 1] >= 0).sum()
    m = compare("detection_out", ref["detection_out"], ours["detection_out"], 0.999)
    assert m.passed and m.max_abs_error < 1e-4, m
    np.testing.assert_allclose(ours["mbox_priorbox"], ref["mbox_priorbox"], atol=1e-6)
    np.testing.assert_allclose(ours["conv2_norm"], ref["conv2_norm"], rtol=1e-4, atol=1e-4)


def test_ssd_matches_opencv_dnn(tmp_path):
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless (the 'test' extra) is OpenCV's "
                                             "Caffe importer, the second reference")
    if not hasattr(cv2, "dnn") or not hasattr(cv2.dnn, "readNetFromCaffe"):
        pytest.skip(f"OpenCV {cv2.__version__} has no Caffe importer (removed in 5.0)")
    outputs = ["detection_out", "mbox_priorbox", "conv2_norm", "mbox_conf_flatten"]
    x, ours, _, (prototxt, caffemodel) = _ssd_run(tmp_path, caffe_zoo.ssd(), outputs)
    cv_net = cv2.dnn.readNetFromCaffe(str(prototxt), str(caffemodel))
    cv_net.setInput(x)
    theirs = dict(zip(outputs, cv_net.forward(outputs)))
    m = compare("detection_out", theirs["detection_out"], ours["detection_out"], 0.999)
    assert m.passed and m.max_abs_error < 1e-4, m
    assert (theirs["detection_out"][0, 0, :, 1] >= 0).sum() == (ours["detection_out"][0, 0, :, 1] >= 0).sum()
    for name in outputs[1:]:
        np.testing.assert_allclose(ours[name], theirs[name].reshape(ours[name].shape), rtol=1e-4,
                                   atol=1e-4, err_msg=name)


# ---- through the CLI ---------------------------------------------------------------------
def test_ssd_through_the_cli(tmp_path):
    import yaml
    from tests.caffe.caffe_net import sha256

    net = net_from_prototxt(caffe_zoo.ssd(), {"data": SSD_INPUT}, seed=5)
    prototxt, caffemodel = net.save(tmp_path / "model", "ssd")
    model = {"platform": "caffe", "model_file_path": "model/ssd.prototxt",
             "model_sha256_checksum": sha256(prototxt), "weight_file_path": "model/ssd.caffemodel",
             "weight_sha256_checksum": sha256(caffemodel),
             "subgraphs": [{"input_tensors": "data", "input_shapes": "1,64,64,3",
                            "output_tensors": ["detection_out", "mbox_conf_flatten"],
                            "output_shapes": ["1,1,50,7", "1,5632"],
                            "output_data_formats": ["NONE", "NONE"]}],
             "runtime": "cpu"}
    cfg = tmp_path / "deploy.yml"
    cfg.write_text(yaml.safe_dump({"library_name": "ssd", "target_abis": ["host"],
                                   "models": {"ssd": model}}, sort_keys=False))
    r = cli("convert", f"--config={cfg}", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    report = tmp_path / "r.json"
    r = cli("run", f"--config={cfg}", "--validate", f"--json={report}", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    results = {v["name"]: v for v in json.loads(report.read_text())["models"][0]["validation"]}
    assert results["detection_out"]["passed"] and results["detection_out"]["cosine"] >= 0.999
    assert results["mbox_conf_flatten"]["cosine"] >= 0.999


def test_detection_output_errors_name_the_layer(tmp_path):
    text = caffe_zoo.ssd().replace("num_classes: 4 ", "")
    net = net_from_prototxt(text.replace('detection_output_param { ', 'detection_output_param { num_classes: 4 '),
                            {"data": SSD_INPUT})
    net.net.layer[-1].detection_output_param.ClearField("num_classes")
    from mace.errors import ModelError
    with pytest.raises(ModelError, match="detection_out.*num_classes"):
        convert_net(tmp_path, net, {"data": rand(*SSD_INPUT)}, ["detection_out"])
