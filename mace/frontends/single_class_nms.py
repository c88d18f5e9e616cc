"""TensorFlow's NonMaxSuppression (V1-V5) and TFLite's NON_MAX_SUPPRESSION_V4/V5 on the IR's
NonMaxSuppression (ONNX's op, batches x classes): boxes [N, 4] and scores [N] become one batch of
one class, and the box column of the rows it keeps is the selected indices (int32).

Unpadded, the indices are as long as the run found (the engine cuts them, mark_ragged). Padded
(TensorFlow's pad_to_max_output_size, TFLite always) the op keeps its whole bound, zeros after the
kept rows, grown to max_output_size; the selected scores past the valid count are 0, as both
frameworks write them. TensorFlow's soft NMS (V5's soft_nms_sigma > 0) and every TFLite NMS
(LiteRT drops a box at IoU >= the threshold, TensorFlow above it) go through the IR's
SoftNonMaxSuppression instead (`add_soft_nms`). Both frontends' contexts have the same add / temp /
add_const / shape.
"""
from __future__ import annotations

import numpy as np


def add_single_class_nms(ctx, node, boxes: str, scores: str, limit: int, iou: float, score_threshold,
                         pad: bool, outputs: tuple) -> None:
    """outputs: (selected indices, selected scores or None, valid count or None) tensor names."""
    n = ctx.shape(boxes)[0]
    batch_boxes = _reshape(ctx, node, boxes, [1, n, 4], "boxes")
    batch_scores = _reshape(ctx, node, scores, [1, 1, n], "scores")
    rows, length = ctx.temp(node, "rows"), ctx.temp(node, "length")
    ctx.add("NonMaxSuppression", node, [batch_boxes, batch_scores], [rows, length], name=ctx.temp(node, "nms"),
            max_output_boxes_per_class=int(limit), iou_threshold=float(iou),
            score_threshold=float(0.0 if score_threshold is None else score_threshold),
            has_score_threshold=int(score_threshold is not None), center_point_box=0, padded=int(pad))
    index = ctx.temp(node, "index")
    column = ctx.add_const(ctx.temp(node, "box_column"), np.array(2, np.int64))
    ctx.add("Gather", node, [rows, column], [index], name=index, axis=1)
    bound = min(int(limit), n)
    if pad and limit > bound:   # the frameworks pad to max_output_size even past N boxes
        grown = ctx.temp(node, "index_padded")
        ctx.add("Pad", node, [index], [grown], name=grown, paddings=[0, int(limit) - bound])
        index = grown
    selected, selected_scores, valid = outputs
    ctx.add("Cast", node, [index], [selected], name=ctx.temp(node, "indices"), to="int32")
    if selected_scores is not None:
        _add_scores(ctx, node, scores, index, length, pad, selected_scores)
    if valid is not None:
        count = _reshape(ctx, node, length, [], "count")
        ctx.add("Cast", node, [count], [valid], name=ctx.temp(node, "valid"), to="int32")


def _reshape(ctx, node, x: str, dims: list, what: str) -> str:
    out = ctx.temp(node, what)
    ctx.add("Reshape", node, [x], [out], name=out, dims=list(dims))
    return out


def _add_scores(ctx, node, scores, index, length, pad, out) -> None:
    """The scores of the kept boxes; padded, 0 past the valid count (index 0 points at a box)."""
    if not pad:
        ctx.add("Gather", node, [scores, index], [out], name=ctx.temp(node, "selected_scores"), axis=0)
        return
    picked, kept = ctx.temp(node, "picked_scores"), ctx.temp(node, "kept")
    ctx.add("Gather", node, [scores, index], [picked], name=picked, axis=0)
    slots = ctx.add_const(ctx.temp(node, "slots"), np.arange(ctx.shape(index)[0], dtype=np.int64))
    ctx.add("Eltwise", node, [slots, length], [kept], name=kept, type="LESS")
    zero = ctx.add_const(ctx.temp(node, "zero"), np.zeros((), ctx.dtype(scores)))
    ctx.add("Select", node, [kept, picked, zero], [out], name=ctx.temp(node, "selected_scores"))


def add_soft_nms(ctx, node, boxes: str, scores: str, limit: int, iou: float, score_threshold: float,
                 sigma: float, tflite: bool, pad: bool, outputs: tuple) -> None:
    """The same outputs through the IR's SoftNonMaxSuppression (mace/ops/soft_non_max_suppression.py):
    TensorFlow's V5 with soft NMS, and every TFLite NMS (LiteRT drops a box at IoU >= the threshold)."""
    selected, selected_scores, valid = outputs
    length = ctx.temp(node, "length")
    ctx.add("SoftNonMaxSuppression", node, [boxes, scores],
            [selected, selected_scores or ctx.temp(node, "scores"), length], name=ctx.temp(node, "nms"),
            max_output_size=int(limit), iou_threshold=float(iou), score_threshold=float(score_threshold),
            soft_nms_sigma=float(sigma), tflite=int(tflite), padded=int(pad))
    if valid is not None:
        count = _reshape(ctx, node, length, [], "count")
        ctx.add("Cast", node, [count], [valid], name=ctx.temp(node, "valid"), to="int32")
