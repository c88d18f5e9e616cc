"""DetectionPostProcess (TFLite's custom TFLite_Detection_PostProcess, the tail of TF Object
Detection API SSD exports): decode box encodings against anchors, then per-class or fast NMS.

Inputs: box_encodings [1, N, >= 4] (y, x, h, w offsets; more columns, keypoints, are ignored),
class_predictions [1, N, num_classes (+ 1 background column first)], anchors [N, 4] (y_center,
x_center, h, w). Decoding, in float64 rounded to float32 as LiteRT does: y = ty / y_scale * ha + ya,
x likewise, half height 0.5 * exp(th / h_scale) * ha, half width likewise; boxes (ymin, xmin, ymax,
xmax). One class's NMS: scores >= nms_score_threshold, best first (ties: lower box first), a box
dropped when its IoU (float32) with a kept one is above nms_iou_threshold.

Fast (use_regular_nms 0): each box's best max_classes_per_detection classes, one NMS over the boxes'
best score, max_detections boxes, each written once per class it keeps. Regular: NMS per class
(min(detections_per_class, max_detections) boxes each), the best max_detections over all classes.

Outputs, static as LiteRT's: detection_boxes [1, D, 4], detection_classes [1, D] (class index,
background not counted), detection_scores [1, D], num_detections [1] (float32), D = max_detections *
max_classes_per_detection; rows past the detections are zero.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("DetectionPostProcess", layout=Layout.ANY)
class DetectionPostProcess(OpSpec):
    attrs = {
        "detections_per_class": 100, "h_scale": REQUIRED, "max_classes_per_detection": 1,
        "max_detections": REQUIRED, "nms_iou_threshold": REQUIRED, "nms_score_threshold": REQUIRED,
        "num_classes": REQUIRED, "use_regular_nms": 0, "w_scale": REQUIRED, "x_scale": REQUIRED,
        "y_scale": REQUIRED
    }

    @staticmethod
    def infer(ctx):
        rows = int(ctx.arg("max_detections")) * int(ctx.arg("max_classes_per_detection"))
        return [((1, rows, 4), np.float32), ((1, rows), np.float32), ((1, rows), np.float32), ((1,), np.float32)]


def decode(encodings: np.ndarray, anchors: np.ndarray, scales) -> np.ndarray:
    """[N, 4] float32 corner boxes (ymin, xmin, ymax, xmax)."""
    e, a = encodings[:, :4].astype(np.float64), anchors.astype(np.float64)
    y_scale, x_scale, h_scale, w_scale = scales
    yc = (e[:, 0] / y_scale * a[:, 2] + a[:, 0]).astype(np.float32)
    xc = (e[:, 1] / x_scale * a[:, 3] + a[:, 1]).astype(np.float32)
    half_h = (0.5 * np.exp(e[:, 2] / h_scale) * a[:, 2]).astype(np.float32)
    half_w = (0.5 * np.exp(e[:, 3] / w_scale) * a[:, 3]).astype(np.float32)
    return np.stack([yc - half_h, xc - half_w, yc + half_h, xc + half_w], axis=1)


def iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU in float32 of one corner box with each of `others`; 0 where a box has no area."""
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    h = np.maximum(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]), np.float32(0))
    w = np.maximum(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]), np.float32(0))
    inter = h * w
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = inter / (area + areas - inter)
    return np.where((area > 0) & (areas > 0), ratio, np.float32(0))


def single_class(boxes, scores, limit: int, score_threshold: float, iou_threshold: float) -> list:
    """Indices of the boxes one class keeps, best first."""
    candidates = np.flatnonzero(scores >= np.float32(score_threshold))
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    active = np.ones(len(order), bool)
    kept = []
    for i, box in enumerate(order):
        if len(kept) >= limit:
            break
        if not active[i]:
            continue
        kept.append(int(box))
        active[i + 1:] &= ~(iou(boxes[box], boxes[order[i + 1:]]) > np.float32(iou_threshold))
    return kept


@kernel("DetectionPostProcess", "cpu")
class DetectionPostProcessCpu(Kernel):
    def setup(self, ctx):
        self.max_detections = int(ctx.arg("max_detections"))
        self.per_detection = int(ctx.arg("max_classes_per_detection"))
        self.per_class = min(int(ctx.arg("detections_per_class")), self.max_detections)
        self.regular = bool(ctx.arg("use_regular_nms"))
        self.classes = int(ctx.arg("num_classes"))
        self.thresholds = (float(ctx.arg("nms_score_threshold")), float(ctx.arg("nms_iou_threshold")))
        self.scales = tuple(float(ctx.arg(k)) for k in ("y_scale", "x_scale", "h_scale", "w_scale"))

    def run(self, inputs, outputs):
        encodings, predictions, anchors = inputs
        boxes = decode(encodings[0], anchors, self.scales)
        scores = predictions[0][:, predictions.shape[2] - self.classes:]   # past a background column
        rows, count = self._regular(boxes, scores) if self.regular else self._fast(boxes, scores)
        for out in outputs:
            out.fill(0)
        for row, box, cls, score in rows:
            outputs[0][0, row], outputs[1][0, row], outputs[2][0, row] = boxes[box], cls, score
        outputs[3][0] = count

    def _fast(self, boxes, scores):
        """(row, box, class, score) of each box's best classes, NMS over their best score."""
        k = min(self.per_detection, self.classes)
        best = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        top = scores[np.arange(len(scores)), best[:, 0]]
        kept = single_class(boxes, top, self.max_detections, *self.thresholds)
        rows = [(i * self.per_detection + j, box, cls, scores[box, cls])
                for i, box in enumerate(kept) for j, cls in enumerate(best[box])]
        return rows, len(kept)

    def _regular(self, boxes, scores):
        """(row, box, class, score): NMS per class, the best over all classes (ties: lower class)."""
        found = [(scores[box, cls], box, cls) for cls in range(self.classes)
                 for box in single_class(boxes, scores[:, cls], self.per_class, *self.thresholds)]
        found.sort(key=lambda f: -f[0])
        best = found[:self.max_detections]
        return [(r, box, cls, score) for r, (score, box, cls) in enumerate(best)], len(best)
