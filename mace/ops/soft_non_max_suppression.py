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
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("SoftNonMaxSuppression", layout=Layout.ANY)
class SoftNonMaxSuppression(OpSpec):
    @staticmethod
    def infer(ctx):
        limit = int(ctx.arg("max_output_size"))
        bound = limit if ctx.arg("padded", 0) else min(limit, ctx.shapes[0][0])
        return [((bound,), np.int32), ((bound,), ctx.dtypes[1]), ((1,), np.int64)]

    @staticmethod
    def ragged(op) -> dict:
        return {} if get_arg(op, "padded", 0) else {0: (0, 2), 1: (0, 2)}


def iou32(boxes: np.ndarray, i: int, j: int) -> np.float32:
    """IoU of boxes i and j in float32, corners in either order; 0 where either has no area."""
    a, b = boxes[i], boxes[j]
    ay0, ay1, ax0, ax1 = min(a[0], a[2]), max(a[0], a[2]), min(a[1], a[3]), max(a[1], a[3])
    by0, by1, bx0, bx1 = min(b[0], b[2]), max(b[0], b[2]), min(b[1], b[3]), max(b[1], b[3])
    area_a, area_b = (ay1 - ay0) * (ax1 - ax0), (by1 - by0) * (bx1 - bx0)
    if area_a <= 0 or area_b <= 0:
        return np.float32(0)
    zero = np.float32(0)
    inter = max(min(ay1, by1) - max(ay0, by0), zero) * max(min(ax1, bx1) - max(ax0, bx0), zero)
    return inter / (area_a + area_b - inter)


@kernel("SoftNonMaxSuppression", "cpu")
class SoftNonMaxSuppressionCpu(Kernel):
    def setup(self, ctx):
        self.limit = int(ctx.arg("max_output_size"))
        self.iou_threshold = np.float32(ctx.arg("iou_threshold"))
        self.score_threshold = np.float32(ctx.arg("score_threshold"))
        sigma = float(ctx.arg("soft_nms_sigma", 0.0))
        self.scale = np.float32(-0.5 / sigma) if sigma > 0 else None
        self.tflite = bool(ctx.arg("tflite", 0))

    def run(self, inputs, outputs):
        boxes, scores = inputs[0].astype(np.float32), inputs[1].astype(np.float32)
        kept, kept_scores = self._select(boxes, scores)
        write_ragged(outputs[0], np.array(kept, np.int32), 0, outputs[2])
        write_ragged(outputs[1], np.array(kept_scores, outputs[1].dtype), 0, outputs[2])

    def _select(self, boxes, scores):
        line = [(-s, i, 0) for i, s in enumerate(scores) if s > self.score_threshold]
        heapq.heapify(line)
        kept, kept_scores = [], []
        while line and len(kept) < self.limit:
            neg, i, begin = heapq.heappop(line)
            score = original = -neg
            dropped = False
            for j in range(len(kept) - 1, begin - 1, -1):
                score, dropped = self._weigh(score, iou32(boxes, i, kept[j]))
                if dropped or score <= self.score_threshold:
                    break
            if dropped:
                continue
            if score == original:
                kept.append(i)
                kept_scores.append(score)
            elif score > self.score_threshold:
                heapq.heappush(line, (-score, i, len(kept)))
        return kept, kept_scores

    def _weigh(self, score, iou):
        """(the score after one kept box's IoU, whether that box drops the candidate)."""
        if self.tflite or self.scale is None:
            drops = iou >= self.iou_threshold if self.tflite else iou > self.iou_threshold
            if drops:
                return score, True
            return (score * np.exp(self.scale * iou * iou) if self.scale is not None else score), False
        return np.float32(score * np.exp(self.scale * iou * iou)), False   # TensorFlow: no threshold
