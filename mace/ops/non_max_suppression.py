"""NonMaxSuppression (ONNX): per batch and class, the boxes kept by greedy IoU suppression, best
score first, as [n, 3] int64 rows (batch, class, box).

Inputs: boxes [B, N, 4], scores [B, C, N]. Args: max_output_boxes_per_class, iou_threshold,
score_threshold (absent: no score filter, `has_score_threshold` 0), center_point_box (0: corners
[y1, x1, y2, x2] in any order; 1: [x_center, y_center, width, height]). A box is kept when its
score is above score_threshold and its IoU with every box kept before in its class is at most
iou_threshold; equal scores go lower box index first.
n depends on the data: output 0 is planned at B * C * min(max_output_boxes_per_class, N) rows
and output 1, shape (1,), holds n (`OpSpec.ragged`, mace/ops/_ragged.py). Arg `padded` 1 (TensorFlow's
pad_to_max_output_size, TFLite's NMS): output 0 is the whole bound, its rows past n zero, and is
not cut (mace/frontends/single_class_nms.py).
"""
import numpy as np

from mace.ir.args import get_arg
from mace.ops._ragged import write_ragged
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("NonMaxSuppression", layout=Layout.ANY)
class NonMaxSuppression(OpSpec):
    attrs = {
        "center_point_box": 0, "has_score_threshold": 0, "iou_threshold": 0.0,
        "max_output_boxes_per_class": 0, "padded": 0, "score_threshold": REQUIRED
    }

    @staticmethod
    def infer(ctx):
        (b, n, _), (_, c, _) = ctx.shapes[0], ctx.shapes[1]
        bound = b * c * min(int(ctx.arg("max_output_boxes_per_class")), n)
        return [((bound, 3), np.int64), ((1,), np.int64)]

    @staticmethod
    def ragged(op) -> dict:
        return {} if get_arg(op, "padded", 0) else {0: (0, 1)}


def corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """[N, 4] as (y_min, x_min, y_max, x_max) in float64."""
    boxes = boxes.astype(np.float64)
    if center_point_box:
        x, y, w, h = boxes.T
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], axis=1)
    return np.stack([np.minimum(boxes[:, 0], boxes[:, 2]), np.minimum(boxes[:, 1], boxes[:, 3]),
                     np.maximum(boxes[:, 0], boxes[:, 2]), np.maximum(boxes[:, 1], boxes[:, 3])], axis=1)


def iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one corner box with each of `others`; 0 where a box has no area."""
    h = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    w = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = np.where((h > 0) & (w > 0), h * w, 0.0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    valid = (inter > 0) & (area > 0) & (areas > 0) & (union > 0)
    return np.where(valid, inter / np.where(valid, union, 1.0), 0.0)


def keep_boxes(boxes, scores, limit, iou_threshold, score_threshold) -> list:
    """Box indices kept for one class, best first."""
    order = np.argsort(-scores.astype(np.float64), kind="stable")   # ties: the lower index first
    if score_threshold is not None:
        order = order[scores[order] > score_threshold]
    kept = []
    for i in order:
        if len(kept) >= limit:
            break
        if not kept or not (iou(boxes[i], boxes[kept]) > iou_threshold).any():
            kept.append(int(i))
    return kept


@kernel("NonMaxSuppression", "cpu")
class NonMaxSuppressionCpu(Kernel):
    def setup(self, ctx):
        self.limit = int(ctx.arg("max_output_boxes_per_class"))
        self.iou_threshold = float(ctx.arg("iou_threshold"))
        self.score_threshold = float(ctx.arg("score_threshold")) if ctx.arg("has_score_threshold") else None
        self.center = int(ctx.arg("center_point_box"))

    def run(self, inputs, outputs):
        boxes, scores = inputs
        rows = []
        for b in range(scores.shape[0]):
            corner = corners(boxes[b], self.center)
            for c in range(scores.shape[1]):
                for i in keep_boxes(corner, scores[b, c], self.limit, self.iou_threshold, self.score_threshold):
                    rows.append((b, c, i))
        write_ragged(outputs[0], np.array(rows, np.int64).reshape(-1, 3), 0, outputs[1])
