"""TFLite's NON_MAX_SUPPRESSION_V4 / V5 (padded to max_output_size, with the valid count) against
LiteRT, on models TensorFlow's converter made from tf.image NMS functions."""
from __future__ import annotations

import numpy as np
import pytest

from mace.errors import ModelError
from tests.tensorflow.test_tf_data_dependent_outputs import detections
from tests.tflite.tfl_case import compare, op_types, ours, tf, to_tflite


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


def test_soft_nms_is_refused_naming_the_op(tmp_path):
    path = to_tflite(lambda b, s: tf.image.non_max_suppression_with_scores(b, s, 10, soft_nms_sigma=0.5),
                     [(24, 4), (24,)], tmp_path / "soft.tflite")
    with pytest.raises(ModelError, match=r"NON_MAX_SUPPRESSION_V5 '.*': soft_nms_sigma 0.5: soft NMS"):
        ours(path, _feeds(4))
