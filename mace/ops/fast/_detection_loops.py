"""numba loop behind the fast DetectionOutput (imported only through
_jit.op_loops("_detection_loops")): Caffe's greedy NMS over score-ordered candidates.

The reference keeps a Python list and, for each candidate, computes its IoU with every box
kept so far in numpy (~20 us a candidate, up to top_k = 400 of them per class: res10's SSD
head spent 15 ms there). The loop does the same float64 arithmetic in the same order (the
reference's np.maximum / np.minimum / np.clip with their NaN rules, area 0 for a negative
side, IoU 0 for a union that is not > 0) and stops at the first kept box that suppresses:
the same decisions, so the same kept boxes.
"""
from __future__ import annotations

from numba import njit

OPTS = dict(cache=True, nogil=True, error_model="numpy")


@njit(inline="always", **OPTS)
def _larger(x, y):   # np.maximum: a NaN on either side is the result
    return x if x >= y or x != x else y


@njit(inline="always", **OPTS)
def _smaller(x, y):   # np.minimum
    return x if x <= y or x != x else y


@njit(inline="always", **OPTS)
def _area(b):
    w, h = b[2] - b[0], b[3] - b[1]
    return 0.0 if (w < 0 or h < 0) else w * h


@njit(inline="always", **OPTS)
def _iou(a, b):
    w = _smaller(a[2], b[2]) - _larger(a[0], b[0])
    h = _smaller(a[3], b[3]) - _larger(a[1], b[1])
    w = 0.0 if w < 0 else w   # np.clip(., 0, None): a NaN stays NaN
    h = 0.0 if h < 0 else h
    inter = w * h
    union = _area(a) + _area(b) - inter
    return inter / union if union > 0 else 0.0


@njit(**OPTS)
def greedy_nms(boxes, order, nms_threshold, eta, kept):
    """Caffe's ApplyNMSFast over candidates `order` (best first): kept[:n] gets the indices
    kept, n is returned. eta < 1 lowers the threshold after each kept box while it is > 0.5."""
    n, limit = 0, nms_threshold
    for t in range(order.shape[0]):
        i, keep = order[t], True
        for s in range(n):
            if not _iou(boxes[i], boxes[kept[s]]) <= limit:
                keep = False
                break
        if keep:
            kept[n] = i
            n += 1
            if eta < 1 and limit > 0.5:
                limit *= eta
    return n
