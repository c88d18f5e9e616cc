"""SoftNonMaxSuppression: one class's NMS as TensorFlow's NonMaxSuppressionV5 and TFLite's
NON_MAX_SUPPRESSION_V4/V5 run it, soft NMS included: kept box indices (int32) best first, and
their scores.

Inputs: boxes [N, 4] (corners in either order), scores [N]. Args: max_output_size,
iou_threshold, score_threshold, soft_nms_sigma (0: hard suppression), tflite (1: LiteRT's rule, a
box whose IoU with a kept one is >= iou_threshold is dropped also under soft NMS; 0: TensorFlow's,
above the threshold drops it under hard NMS, and soft NMS ignores the threshold), padded.
Candidates are the boxes scored above score_threshold, best first (ties: lower index); a popped
candidate is compared with the boxes kept since it was last looked at, its score multiplied by
exp(-iou^2 / (2 sigma)) for each (float32); unchanged it is kept, lowered but still above
score_threshold it goes back in line.
Outputs 0 and 1 are planned at min(max_output_size, N) and output 2, shape (1,), holds how many
were kept (`OpSpec.ragged`); `padded` 1 (LiteRT always, TensorFlow's pad_to_max_output_size):
max_output_size long, zeros after the kept ones, not cut.
"""
import heapq

import numpy as np

from mace.ir.args import get_arg
from mace.ops._ragged import write_ragged
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("SoftNonMaxSuppression", layout=Layout.ANY)
class SoftNonMaxSuppression(OpSpec):
    attrs = {
        "iou_threshold": REQUIRED, "max_output_size": REQUIRED, "padded": 0, "score_threshold": REQUIRED,
        "soft_nms_sigma": 0.0, "tflite": 0
    }

    @staticmethod
    def infer(ctx):
        limit = int(ctx.arg("max_output_size"))
        bound = limit if ctx.arg("padded") else min(limit, ctx.shapes[0][0])
        return [((bound,), np.int32), ((bound,), ctx.dtypes[1]), ((1,), np.int64)]

    @staticmethod
    def ragged(op) -> dict:
        return {} if get_arg(op, "padded", 0) else {0: (0, 2), 1: (0, 2)}


def corners(boxes: np.ndarray) -> np.ndarray:
    """[N, 4] float32 as (y_min, x_min, y_max, x_max)."""
    return np.concatenate([np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])], axis=1)


def ious(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU in float32 of one corner box with each of `others`; 0 where either has no area."""
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    zero = np.float32(0)
    inter = (np.maximum(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]), zero)
             * np.maximum(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]), zero))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = inter / (area + areas - inter)
    return np.where((area > 0) & (areas > 0), ratio, zero)


@kernel("SoftNonMaxSuppression", "cpu")
class SoftNonMaxSuppressionCpu(Kernel):
    def setup(self, ctx):
        self.limit = int(ctx.arg("max_output_size"))
        self.iou_threshold = np.float32(ctx.arg("iou_threshold"))
        self.score_threshold = np.float32(ctx.arg("score_threshold"))
        sigma = float(ctx.arg("soft_nms_sigma"))
        self.scale = np.float32(-0.5 / sigma) if sigma > 0 else None
        self.tflite = bool(ctx.arg("tflite"))

    def run(self, inputs, outputs):
        boxes, scores = inputs[0].astype(np.float32), inputs[1].astype(np.float32)
        kept, kept_scores = self._select(boxes, scores)
        write_ragged(outputs[0], np.array(kept, np.int32), 0, outputs[2])
        write_ragged(outputs[1], np.array(kept_scores, outputs[1].dtype), 0, outputs[2])

    def _select(self, boxes, scores):
        boxes = corners(boxes)
        line = [(-s, i, 0) for i, s in enumerate(scores) if s > self.score_threshold]
        heapq.heapify(line)
        kept, kept_scores = [], []
        while line and len(kept) < self.limit:
            neg, i, begin = heapq.heappop(line)
            score = original = -neg
            score = self._weigh(score, ious(boxes[i], boxes[kept[begin:][::-1]]))   # newest kept first
            if score is None:
                continue
            if score == original:
                kept.append(i)
                kept_scores.append(score)
            elif score > self.score_threshold:
                heapq.heappush(line, (-score, i, len(kept)))
        return kept, kept_scores

    def _weigh(self, score, overlaps):
        """The candidate's score after the kept boxes' IoUs `overlaps`, or None where one drops it.
        The frameworks stop at the first drop or once the score is at most score_threshold; either
        way the candidate is out, as it is here (a weight is at most 1)."""
        if self.tflite or self.scale is None:
            drops = overlaps >= self.iou_threshold if self.tflite else overlaps > self.iou_threshold
            if drops.any():
                return None
        if self.scale is None:
            return score
        weights = np.exp(self.scale * overlaps * overlaps)   # TensorFlow's soft NMS: no threshold
        for w in weights:   # one product at a time in float32, in the frameworks' order
            score = np.float32(score * w)
        return score
