"""TFLite's NON_MAX_SUPPRESSION_V4 / V5 (padded to max_output_size, with the valid count; soft NMS)
and the custom TFLite_Detection_PostProcess against LiteRT, on models TensorFlow's converter made
from tf.image NMS functions and from an Object Detection API style post-processing function."""
from __future__ import annotations

import numpy as np
import pytest

from mace.errors import ModelError
from tests.tensorflow.test_tf_data_dependent_outputs import detections
from mace.frontends.tflite.model_file import read_model
from tests.tflite.tfl_case import compare, io_names, op_types, ours, tf, to_tflite


def _feeds(seed, n=24):
    boxes, scores = detections(seed, n)
    return {"x0": boxes, "x1": scores}


@pytest.mark.parametrize("limit, seed", [(10, 0), (40, 1)])   # 40: past the 24 boxes, padded still
def test_v4_indices_padded_with_the_valid_count(tmp_path, limit, seed):
    path = to_tflite(lambda b, s: tf.image.non_max_suppression(b, s, limit, iou_threshold=0.4, score_threshold=0.2),
                     [(24, 4), (24,)], tmp_path / "nms4.tflite")
    assert op_types(path) == {"NON_MAX_SUPPRESSION_V4"}
    compare(path, _feeds(seed))


def test_v5_scores_zero_past_the_count(tmp_path):
    path = to_tflite(lambda b, s: tf.image.non_max_suppression_with_scores(b, s, 30, iou_threshold=0.45,
                                                                           score_threshold=0.1),
                     [(24, 4), (24,)], tmp_path / "nms5.tflite")
    assert op_types(path) == {"NON_MAX_SUPPRESSION_V5"}
    compare(path, _feeds(2))
    got = ours(path, _feeds(2))
    indices, scores = got.values()
    assert len(indices) == 30 and scores[-1] == 0


def test_v4_raw_with_valid_count_output(tmp_path):
    def fn(b, s):
        indices, valid = tf.raw_ops.NonMaxSuppressionV4(boxes=b, scores=s, max_output_size=16, iou_threshold=0.3,
                                                        score_threshold=0.25, pad_to_max_output_size=True)
        return tf.gather(b, indices) * 2.0, valid
    path = to_tflite(fn, [(24, 4), (24,)], tmp_path / "nms4v.tflite")
    compare(path, _feeds(3))


@pytest.mark.parametrize("sigma", [0.5, 0.2])
def test_v5_soft_nms(tmp_path, sigma):
    path = to_tflite(lambda b, s: tf.image.non_max_suppression_with_scores(b, s, 20, iou_threshold=0.6,
                                                                           score_threshold=0.05,
                                                                           soft_nms_sigma=sigma),
                     [(24, 4), (24,)], tmp_path / "soft.tflite")
    inputs = _feeds(4)
    compare(path, inputs)
    indices, scores = ours(path, inputs).values()
    assert (scores[scores > 0] < inputs["x1"][indices[scores > 0]]).any()   # some scores were lowered


def test_duplicate_boxes_at_iou_threshold_one(tmp_path):
    """LiteRT drops a box whose IoU with a kept one is >= the threshold: a duplicate at 1.0."""
    path = to_tflite(lambda b, s: tf.image.non_max_suppression(b, s, 10, iou_threshold=1.0),
                     [(24, 4), (24,)], tmp_path / "dup.tflite")
    inputs = _feeds(5)
    inputs["x0"][1] = inputs["x0"][0]
    compare(path, inputs)


# ---- TFLite_Detection_PostProcess -------------------------------------------------------
N_ANCHORS = 48


def anchors(n=N_ANCHORS, seed=9):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(0.2, 0.8, (n, 2)), rng.uniform(0.1, 0.4, (n, 2))], 1).astype(np.float32)


def post_process_model(path, classes=3, background=True, regular=False, per_detection=1, max_detections=10,
                       per_class=5, score_threshold=0.3, iou_threshold=0.5, coords=4):
    """An SSD export's tail as the TF Object Detection API writes it: a function implementing
    TFLite_Detection_PostProcess (the converter fuses it into the custom op) after a sigmoid on
    the class logits, saved and converted from a SavedModel."""
    import tempfile
    attrs = {"max_detections": ("i", max_detections), "max_classes_per_detection": ("i", per_detection),
             "detections_per_class": ("i", per_class), "use_regular_nms": ("b", str(regular).lower()),
             "nms_score_threshold": ("f", score_threshold), "nms_iou_threshold": ("f", iou_threshold),
             "y_scale": ("f", 10.0), "x_scale": ("f", 10.0), "h_scale": ("f", 5.0), "w_scale": ("f", 5.0),
             "num_classes": ("i", classes)}
    signature = " ".join(['name: "TFLite_Detection_PostProcess"'] + [
        f'attr {{ key: "{k}" value {{ {t}: {v} }} }}' for k, (t, v) in attrs.items()])

    @tf.function(experimental_implements=signature)
    def post_process(boxes, scores, anchor):
        zero = tf.constant(0.0)
        return zero, zero, zero, zero

    width = classes + int(background)

    class Head(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec((1, N_ANCHORS, coords), tf.float32, name="x0"),
                                      tf.TensorSpec((1, N_ANCHORS, width), tf.float32, name="x1")])
        def __call__(self, encodings, logits):
            return post_process(encodings * 1.5, tf.sigmoid(logits), tf.constant(anchors()))

    with tempfile.TemporaryDirectory() as saved:
        head = Head()
        tf.saved_model.save(head, saved, signatures=head.__call__)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        converter.allow_custom_ops = True
        path.write_bytes(converter.convert())
    return path


def head_feeds(path, seed):
    rng = np.random.default_rng(seed)
    shapes = {t.name: t.shape for t in read_model(path).tensors}
    ins = sorted(io_names(path)[0], key=lambda n: "x1" in n)   # x0: encodings, x1: logits
    return {ins[0]: rng.normal(0, 1, shapes[ins[0]]).astype(np.float32),
            ins[1]: rng.normal(0, 1.5, shapes[ins[1]]).astype(np.float32)}


@pytest.mark.parametrize("options", [
    {}, {"background": False}, {"per_detection": 2}, {"regular": True}, {"regular": True, "per_class": 3},
    {"coords": 6, "score_threshold": 0.6, "iou_threshold": 0.3}],
    ids=["fast", "no_background", "two_classes_each", "regular", "regular_3_per_class", "keypoints"])
def test_post_process_equals_litert(tmp_path, options):
    path = post_process_model(tmp_path / "ssd_tail.tflite", **options)
    assert [op.custom_code for op in read_model(path).ops if op.type == "CUSTOM"] == ["TFLite_Detection_PostProcess"]
    counts = set()
    for seed in range(3):
        inputs = head_feeds(path, seed)
        compare(path, inputs)
        counts.add(float(next(v for k, v in ours(path, inputs).items() if v.shape == (1,))[0]))
    assert counts - {0.0}   # something was detected


def test_post_process_missing_option_is_named(tmp_path, monkeypatch):
    path = post_process_model(tmp_path / "ssd_tail.tflite")
    from mace.frontends.tflite import ops_detection
    monkeypatch.setattr(ops_detection, "POST_PROCESS_OPTIONS",
                        ops_detection.POST_PROCESS_OPTIONS + (("anchor_scale", float, None),))
    with pytest.raises(ModelError, match=r"custom option 'anchor_scale' is missing"):
        ours(path, head_feeds(path, 0))


# ---- through the CLI ------------------------------------------------------------------
def _deployment(tmp_path, path, ranges, code=False):
    from tests.cli_helpers import sha256, write_deployment
    ins, outs = io_names(path)
    shapes = {t.name: t.shape for t in read_model(path).tensors}
    sg = {"input_tensors": ",".join(ins), "input_shapes": [",".join(map(str, shapes[n])) for n in ins],
          "input_data_formats": "NONE", "input_ranges": [ranges[n] for n in ins],
          "output_tensors": ",".join(outs), "output_data_formats": "NONE"}
    model = {"platform": "tflite", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
             "runtime": "cpu", "subgraphs": [sg], "obfuscate": int(code)}
    code_keys = {"model_graph_format": "code", "model_data_format": "code"} if code else {}
    return write_deployment(tmp_path / "deploy.yml", {"det": model}, library="tfldet", **code_keys)


@pytest.mark.parametrize("kind, code", [("nms_v5", False), ("post_process", False), ("post_process", True)])
def test_cli_converts_and_validates_against_litert(tmp_path, kind, code):
    """Each through convert and run --validate; the SSD tail also as obfuscated model code."""
    from tests.cli_helpers import cli
    if kind == "nms_v5":
        path = to_tflite(lambda b, s: tf.image.non_max_suppression_with_scores(b, s, 16, iou_threshold=0.3,
                                                                               score_threshold=0.2),
                         [(24, 4), (24,)], tmp_path / "nms5.tflite")
        ranges = {"x0": "0,1", "x1": "0,1"}
    else:
        path = post_process_model(tmp_path / "ssd_tail.tflite", regular=True)
        ranges = {n: "-2,2" for n in io_names(path)[0]}
    yml = _deployment(tmp_path, path, ranges, code)
    for command in (("convert",), ("run", "--validate")):
        r = cli(*command, "--config", yml, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout and "FAIL" not in r.stdout, r.stdout


@pytest.mark.parametrize("regular", [False, True])
def test_post_process_on_uint8_inputs_and_anchors(tmp_path, regular):
    """The classic quantized SSD: uint8 tensors into the custom op, which dequantizes them; ours
    reads them as reals (the model's inputs given as uint8 integers) and gives LiteRT's bytes."""
    from mace.config.specs import ModelSpec, TensorSpec
    from mace.frontends import convert
    from mace.runtime.engine import Engine
    from mace.transform.pipeline import transform
    from mace.validate.reference import run_litert
    from tests.tflite.ssd_flatbuffer import uint8_ssd_tail
    rng, n, classes = np.random.default_rng(int(regular)), 48, 3
    options = {"max_detections": 10, "max_classes_per_detection": 1, "detections_per_class": 4,
               "use_regular_nms": int(regular), "nms_score_threshold": 0.3, "nms_iou_threshold": 0.5,
               "num_classes": classes, "y_scale": 10.0, "x_scale": 10.0, "h_scale": 5.0, "w_scale": 5.0}
    path = uint8_ssd_tail(tmp_path / "ssd_u8.tflite", rng.integers(40, 200, (n, 4)), (1 / 256, 0), (0.05, 128),
                          (1 / 256, 0), n, classes + 1, options)
    outputs = io_names(path)[1]
    spec = ModelSpec(path, [TensorSpec("box_encodings", (1, n, 4), "NONE", "uint8"),
                            TensorSpec("class_predictions", (1, n, classes + 1), "NONE", "uint8")],
                     [TensorSpec(name, None, "NONE") for name in outputs])
    graph = convert("tflite", spec)
    transform(graph, {})
    engine = Engine(graph)
    for seed in range(3):
        feeds = {"box_encodings": rng.integers(0, 256, (1, n, 4)).astype(np.uint8),
                 "class_predictions": rng.integers(0, 256, (1, n, classes + 1)).astype(np.uint8)}
        got, want = engine.run(feeds), run_litert(path, feeds, outputs)
        for name in outputs:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
