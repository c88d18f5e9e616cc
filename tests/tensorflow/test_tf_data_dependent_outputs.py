"""TensorFlow's NonMaxSuppression V1-V5 and one-input Where: outputs whose length depends on the
data (or padded to max_output_size), against TensorFlow on frozen functions."""
from __future__ import annotations

import numpy as np
import pytest

from mace.errors import ModelError
from tests.tensorflow.tf_case import check, tf


def detections(seed, n=24):
    """Boxes in overlapping pairs (suppression has work to do), corners in either order, scores."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0.2, 0.8, (n, 2))
    centres[n // 2:] = centres[:n - n // 2] + rng.normal(0, 0.02, centres[n // 2:].shape)
    sizes = rng.uniform(0.1, 0.3, (n, 2))
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=1)
    boxes[::3] = boxes[::3][:, [2, 3, 0, 1]]   # some given as (y2, x2, y1, x1)
    return boxes.astype(np.float32), rng.uniform(0, 1, n).astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_v3_indices_as_long_as_the_run_found(seed):
    boxes, scores = detections(seed)

    def fn(boxes, scores):
        return tf.raw_ops.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=20,
                                              iou_threshold=0.4, score_threshold=0.3)
    got, graph = check(fn, {"boxes": boxes, "scores": scores}, expect_ops={"NonMaxSuppressionV3"})
    (out,) = got.values()
    assert 0 < len(out) < 20 and out.dtype == np.int32


def test_v2_and_v1_keep_every_score():
    boxes, scores = detections(3)
    check(lambda boxes, scores: tf.raw_ops.NonMaxSuppressionV2(boxes=boxes, scores=scores, max_output_size=30,
                                                               iou_threshold=0.5),
          {"boxes": boxes, "scores": scores}, expect_ops={"NonMaxSuppressionV2"})
    check(lambda boxes, scores: tf.raw_ops.NonMaxSuppression(boxes=boxes, scores=scores, max_output_size=7,
                                                             iou_threshold=0.3),
          {"boxes": boxes, "scores": scores}, expect_ops={"NonMaxSuppression"})


@pytest.mark.parametrize("pad, limit", [(False, 12), (True, 12), (True, 40)])
def test_v4_valid_count_and_padding(pad, limit):
    boxes, scores = detections(4)

    def fn(boxes, scores):
        return tf.raw_ops.NonMaxSuppressionV4(boxes=boxes, scores=scores, max_output_size=limit,
                                              iou_threshold=0.4, score_threshold=0.2,
                                              pad_to_max_output_size=pad)
    got, _ = check(fn, {"boxes": boxes, "scores": scores}, expect_ops={"NonMaxSuppressionV4"})
    indices, valid = got.values()
    assert valid.shape == () and valid.dtype == np.int32
    assert len(indices) == (limit if pad else valid)


@pytest.mark.parametrize("pad", [False, True])
def test_v5_scores_with_sigma_zero(pad):
    """tf.image.non_max_suppression_with_scores writes V5; padded scores are 0 past the count."""
    boxes, scores = detections(5)

    def fn(boxes, scores):
        return tf.raw_ops.NonMaxSuppressionV5(boxes=boxes, scores=scores, max_output_size=30,
                                              iou_threshold=0.45, score_threshold=float("-inf"),
                                              soft_nms_sigma=0.0, pad_to_max_output_size=pad)
    got, _ = check(fn, {"boxes": boxes, "scores": scores}, expect_ops={"NonMaxSuppressionV5"})
    indices, kept_scores, valid = got.values()
    assert len(indices) == (30 if pad else valid) and (kept_scores[valid:] == 0).all()


@pytest.mark.parametrize("pad, score_threshold", [(False, 0.1), (True, 0.1), (False, float("-inf"))])
def test_v5_soft_nms(pad, score_threshold):
    """sigma > 0: overlapping boxes' scores lowered and put back in line (SoftNonMaxSuppression);
    with a -inf threshold, boxes weighed to 0 come back last with score 0, as in TensorFlow."""
    boxes, scores = detections(6)

    def fn(boxes, scores):
        return tf.raw_ops.NonMaxSuppressionV5(boxes=boxes, scores=scores, max_output_size=20, iou_threshold=0.5,
                                              score_threshold=score_threshold, soft_nms_sigma=0.3,
                                              pad_to_max_output_size=pad)
    got, graph = check(fn, {"boxes": boxes, "scores": scores}, expect_ops={"NonMaxSuppressionV5"})
    assert "SoftNonMaxSuppression" in {op.type for op in graph.net.op}
    indices, kept_scores, valid = got.values()
    assert (np.diff(kept_scores[:valid]) <= 0).all() and (kept_scores[:valid] < scores[indices[:valid]]).any()


def test_a_thresholds_input_is_refused_naming_the_node():
    boxes, scores = detections(6)

    def fn(boxes, scores):
        return tf.image.non_max_suppression(boxes, scores, 10, iou_threshold=tf.reduce_max(scores) / 2)
    with pytest.raises(ModelError, match=r"NonMaxSuppressionV3 '.*': iou_threshold must be static"):
        check(fn, {"boxes": boxes, "scores": scores})


def test_kept_boxes_gathered_by_the_selected_indices():
    """A detection head's tail: the kept boxes and their scores, through Gather and Mul."""
    boxes, scores = detections(7)

    def fn(boxes, scores):
        keep = tf.image.non_max_suppression(boxes, scores, 15, iou_threshold=0.4, score_threshold=0.25)
        return tf.gather(boxes, keep) * 2.0, tf.gather(scores, keep)
    check(fn, {"boxes": boxes, "scores": scores})


def test_where_of_one_input_is_the_true_coordinates():
    x = np.random.default_rng(8).standard_normal((3, 5, 2)).astype(np.float32)
    got, _ = check(lambda x: tf.cast(tf.where(x > 0.3), tf.int32), {"x": x}, expect_ops={"Where"})
    (out,) = got.values()
    assert out.shape == (int((x > 0.3).sum()), 3)
    got, _ = check(lambda x: tf.where(x > 9.0), {"x": x})   # nothing true: no rows
    assert next(iter(got.values())).shape == (0, 3)


def _cli_model(tmp_path, fn, boxes, scores, code=False):
    import yaml
    from tests.cli_helpers import sha256
    from tests.tensorflow.tf_case import freeze, save_pb
    graph_def, outputs = freeze(fn, {"boxes": boxes, "scores": scores})
    path = save_pb(tmp_path / "nms.pb", graph_def)
    sg = {"input_tensors": "boxes,scores", "input_shapes": ["24,4", "24"], "input_data_formats": "NONE",
          "input_ranges": ["0,1", "0,1"], "output_tensors": ",".join(o.split(":")[0] if o.endswith(":0") else o
                                                                    for o in outputs),
          "output_data_formats": "NONE"}
    cfg = tmp_path / "deploy.yml"
    code_keys = {"model_graph_format": "code", "model_data_format": "code"} if code else {}
    cfg.write_text(yaml.safe_dump({"library_name": "tfnms", **code_keys, "models": {"nms": {
        "platform": "tensorflow", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
        "subgraphs": [sg], "runtime": "cpu", "obfuscate": int(code)}}}))
    return cfg


@pytest.mark.parametrize("code", [False, True], ids=["file", "code_obfuscated"])
def test_cli_converts_and_validates_a_detection_tail(tmp_path, code):
    """NMS V3 (its length found at run time) and the kept boxes: convert, run --validate against
    TensorFlow; also as model code with obfuscated names (the length tensor renamed)."""
    from tests.cli_helpers import cli

    def fn(boxes, scores):
        keep = tf.image.non_max_suppression(boxes, scores, 20, iou_threshold=0.3, score_threshold=0.2)
        return tf.gather(boxes, keep)
    cfg = _cli_model(tmp_path, fn, *detections(0), code=code)
    conv = cli("convert", f"--config={cfg}", cwd=tmp_path, timeout=300)
    assert conv.returncode == 0, conv.stdout + conv.stderr
    run = cli("run", f"--config={cfg}", "--validate", cwd=tmp_path, timeout=300)
    assert run.returncode == 0 and "PASS" in run.stdout and "FAIL" not in run.stdout, run.stdout + run.stderr


def test_cli_refuses_a_computed_threshold_naming_the_node(tmp_path):
    from tests.cli_helpers import cli

    def fn(boxes, scores):
        return tf.image.non_max_suppression(boxes, scores, 10, iou_threshold=tf.reduce_max(scores) / 2)
    cfg = _cli_model(tmp_path, fn, *detections(0))
    conv = cli("convert", f"--config={cfg}", cwd=tmp_path, timeout=300)
    assert conv.returncode == 1 and "NonMaxSuppressionV3" in conv.stderr and "iou_threshold must be static" in conv.stderr
    assert "Traceback" not in conv.stderr


def test_where_of_a_scalar_is_refused_naming_the_node(tmp_path):
    """(TensorFlow's own kernel fails at run time on it.)"""
    from tests.tensorflow.tf_case import convert_pb, freeze, save_pb
    inputs = {"x": np.ones((2, 2), np.float32)}
    graph_def, outputs = freeze(lambda x: tf.where(x[0, 0] > 0.0), inputs)
    with pytest.raises(ModelError, match=r"Where '.*': the condition is a scalar"):
        convert_pb(save_pb(tmp_path / "m.pb", graph_def), inputs, outputs)
