"""The tail of TensorFlow Object Detection API exports, small: NMS's rows clipped to a window
(a Where of their areas, a Gather), cut to `total` with a Range of min(total, n) computed at run
time, then PadOrClipBoxList's Slice and Pad whose sizes are computed from a Shape of those rows,
to exactly `total` rows. Convert follows the bounds of those run-time scalars
(mace/transform/value_bounds.py); the outputs are compared with TensorFlow's on frozen
functions, for inputs that keep none, some and more than `total` rows."""
from __future__ import annotations

import numpy as np
import pytest

from mace.errors import ModelError
from tests.tensorflow.test_tf_data_dependent_outputs import detections
from tests.tensorflow.tf_case import check, tf


def pad_or_clip(t, total):
    """PadOrClipBoxList's pad_or_clip_tensor, written out: the first `total` rows, zero-padded
    to `total` (the shapes from tf.shape, so every size is a tensor computed at run time)."""
    shape = tf.shape(t)
    rank = len(t.shape)
    size = tf.stack([_select(shape[0] - total > 0, total, -1)] +
                    [_select(shape[i] - t.shape[i] > 0, t.shape[i], -1) for i in range(1, rank)])
    clipped = tf.slice(t, tf.zeros(rank, tf.int32), size)
    clipped_shape = tf.shape(clipped)
    ends = tf.stack([total - clipped_shape[0]] + [t.shape[i] - clipped_shape[i] for i in range(1, rank)])
    return tf.pad(clipped, tf.stack([tf.zeros(rank, tf.int32), ends], axis=1))


def _select(cond, x, y):
    """TF1's tf.where of scalars (Select, as in the exports; TF2's is SelectV2)."""
    return tf.raw_ops.Select(condition=cond, x=tf.constant(x), y=tf.constant(y))


def tail(kept, total, window=(0.0, 0.0, 1.0, 1.0)):
    """Boxes, scores, classes and the count of what NMS kept, as the exports' postprocessor
    makes them: clipped to `window` (zero-area boxes dropped), at most `total`, padded."""
    def fn(boxes, scores):
        idx = tf.raw_ops.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=kept,
                                             iou_threshold=0.5, score_threshold=0.3)
        rows, row_scores = tf.gather(boxes, idx), tf.gather(scores, idx)
        y1, x1, y2, x2 = tf.split(rows, 4, axis=1)
        wy1, wx1, wy2, wx2 = window
        clipped = tf.concat([tf.maximum(tf.minimum(y1, wy2), wy1), tf.maximum(tf.minimum(x1, wx2), wx1),
                             tf.maximum(tf.minimum(y2, wy2), wy1), tf.maximum(tf.minimum(x2, wx2), wx1)], 1)
        a, b, c, d = tf.split(clipped, 4, axis=1)
        inside = tf.reshape(tf.where(tf.squeeze((c - a) * (d - b), [1]) > 0), [-1])
        clipped, row_scores = tf.gather(clipped, inside), tf.gather(row_scores, inside)
        first = tf.range(tf.minimum(total, tf.shape(clipped)[0]))
        clipped, row_scores = tf.gather(clipped, first), tf.gather(row_scores, first)
        classes = tf.zeros_like(row_scores) + 1.0
        return (pad_or_clip(clipped, total), pad_or_clip(row_scores, total), pad_or_clip(classes, total),
                tf.cast(tf.shape(clipped)[0], tf.float32))
    return fn


@pytest.mark.parametrize("seed, kept, total, window", [
    (0, 20, 20, (0.0, 0.0, 1.0, 1.0)),   # the exports' case: NMS keeps at most `total`
    (1, 20, 30, (0.0, 0.0, 1.0, 1.0)),   # padded further than NMS can keep
    (2, 20, 6, (0.0, 0.0, 1.0, 1.0)),    # NMS keeps more than `total`: cut by the Range
    (3, 20, 20, (0.3, 0.3, 0.7, 0.7)),   # a window that drops boxes outside it (the Where)
    (4, 20, 20, (0.0, 0.0, 0.01, 0.01)),  # a window that drops every box: n = 0
])
def test_detection_tail_pads_to_a_fixed_count_as_tensorflow(seed, kept, total, window):
    boxes, scores = detections(seed)
    got, graph = check(tail(kept, total, window), {"boxes": boxes, "scores": scores},
                       expect_ops={"Range", "Slice", "Pad", "Where", "Select"})
    padded_boxes, padded_scores, classes, count = got.values()
    n = int(count)
    assert padded_boxes.shape == (total, 4) and padded_scores.shape == (total,)
    assert (padded_boxes[n:] == 0).all() and (classes[n:] == 0).all() and (classes[:n] == 1).all()
    assert {op.type for op in graph.net.op} >= {"Range", "RaggedToDense"}
    if window[2] == 0.01:
        assert n == 0
    elif total == 6:
        assert n == 6
    else:
        assert 0 < n < min(kept, total)


@pytest.mark.parametrize("start, delta", [(0, 1), (2, 1), (1, 3)])
def test_a_range_to_a_limit_found_at_run_time_is_as_long_as_tensorflows(start, delta):
    """Range(start, n + 1, delta) of n = rows NMS kept: planned at the most it can give, cut to
    what the run gives when it is a model output, and a Gather by it as long."""
    boxes, scores = detections(5)

    def fn(boxes, scores):
        idx = tf.raw_ops.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=15,
                                             iou_threshold=0.5, score_threshold=0.3)
        r = tf.range(start, tf.shape(idx)[0] + 1, delta)
        return r, tf.gather(scores, tf.minimum(r, 23))
    got, graph = check(fn, {"boxes": boxes, "scores": scores}, expect_ops={"Range"})
    (r, _), (rng,) = got.values(), [op for op in graph.net.op if op.type == "Range"]
    assert len(r) > 1 and graph.shape(rng.output[0]) == (len(range(start, 15 + 1, delta)),)   # n <= 15


def test_a_pad_not_to_a_fixed_count_names_the_node():
    """Paddings computed at run time other than `size - n` at the end of the rows: the result's
    length is neither fixed nor the rows', so convert refuses, naming the Pad."""
    boxes, scores = detections(6)

    def fn(boxes, scores):
        idx = tf.raw_ops.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=10,
                                             iou_threshold=0.5, score_threshold=0.3)
        rows = tf.gather(boxes, idx)
        n = tf.shape(rows)[0]
        return tf.pad(rows, tf.stack([tf.stack([0, n]), tf.stack([0, 0])]))
    with pytest.raises(ModelError, match=r"Pad '.*': paddings .* known only at run time \(axis 0\)"):
        check(fn, {"boxes": boxes, "scores": scores})


def test_a_range_to_a_limit_convert_cannot_bound_names_the_node():
    x = np.arange(6, dtype=np.int32)

    def fn(x):
        return tf.range(tf.reduce_sum(x))
    with pytest.raises(ModelError, match=r"Range '.*': limit is computed at run time from ops whose bounds"):
        check(fn, {"x": x})


@pytest.mark.parametrize("seed", [0, 7])
def test_a_slice_of_a_size_found_at_run_time_keeps_the_first_rows(seed):
    """Slice sizes that are counts found at run time (within bounds convert follows): the first
    min(n, 5) of NMS's rows, and n rows of a static tensor from row 3, columns 1:3; each a Gather
    by a Range planned at the bound, as long as TensorFlow's."""
    boxes, scores = detections(seed)

    def fn(boxes, scores):
        idx = tf.raw_ops.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=12,
                                             iou_threshold=0.5, score_threshold=0.3)
        rows = tf.gather(boxes, idx)
        first = tf.slice(rows, [0, 0], tf.stack([tf.minimum(tf.shape(rows)[0], 5), -1]))
        n = tf.shape(idx)[0]
        return first, tf.slice(boxes, [3, 1], tf.stack([n, 2]))
    got, graph = check(fn, {"boxes": boxes, "scores": scores}, expect_ops={"Slice"})
    first, columns = got.values()
    ranges = [graph.shape(op.output[0]) for op in graph.net.op if op.type == "Range"]
    assert sorted(ranges) == [(5,), (12,)] and 0 < len(first) <= 5 and len(columns) > 5
