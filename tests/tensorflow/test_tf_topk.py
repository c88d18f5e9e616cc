"""TensorFlow's TopKV2: a static k, and a k computed at run time from a Shape of the rows NMS kept
(the TensorFlow Object Detection API's SortByField), against TensorFlow on frozen functions."""
from __future__ import annotations

import numpy as np

from tests.tensorflow.test_tf_data_dependent_outputs import detections
from tests.tensorflow.tf_case import check, tf


def test_static_k_with_ties_keeps_the_lower_index_first():
    x = np.round(np.random.default_rng(0).uniform(0, 4, (3, 12))).astype(np.float32)   # many ties

    def fn(x):
        values, indices = tf.math.top_k(x, k=5)
        return values, indices
    got, _ = check(fn, {"x": x}, expect_ops={"TopKV2"})
    values, indices = got.values()
    assert values.shape == (3, 5) and indices.dtype == np.int32


def test_k_from_the_shape_of_the_rows_nms_kept():
    """NMS's rows sorted again by score with k = their count (Shape at run time), then the boxes
    gathered in that order; Size of the kept rows beside them."""
    for seed in (0, 1):
        boxes, scores = detections(seed)

        def fn(boxes, scores):
            keep = tf.raw_ops.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=20,
                                                  iou_threshold=0.4, score_threshold=0.3)
            kept_scores, kept_boxes = tf.gather(scores, keep), tf.gather(boxes, keep)
            values, order = tf.math.top_k(kept_scores, k=tf.shape(kept_boxes)[0])
            return values, tf.gather(kept_boxes, order), tf.size(kept_scores)
        got, _ = check(fn, {"boxes": boxes, "scores": scores}, expect_ops={"TopKV2", "Shape", "Size"})
        values, sorted_boxes, count = got.values()
        assert 0 < len(values) == len(sorted_boxes) == int(count) < 20
        assert np.all(np.diff(values) <= 0)
