"""DetectionOutput (SSD): decode box offsets against the priors, per-class NMS, keep the best.

Semantics of Caffe's SSD fork (detection_output_layer, bbox_util): inputs loc
(N, P * L * 4; L = 1 with share_location, else num_classes), conf (N, P * num_classes,
already softmaxed) and the priors (1, 2, P * 4: boxes then variances, PriorBox's output).
Per image and class (the background class skipped): scores > confidence_threshold,
the best nms `top_k` of them by score (ties: lower prior first), then greedy NMS
(IoU > nms_threshold suppresses; eta < 1 lowers the threshold after each kept box while
it is above 0.5); over all classes the best keep_top_k survive.

Output (1, 1, K, 7) rows (image_id, label, score, xmin, ymin, xmax, ymax), per image by
label ascending, score descending within a label. Caffe sizes the output to the
detections found; tensors here have static shapes, so K is the most there can be
(N * keep_top_k, or N * classes * candidates without keep_top_k) and rows after the
last detection are -1. With no detection at all an image gets Caffe's row
(image_id, -1, -1, ...), so Caffe's output is always a prefix of this one.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Layout, OpSpec, SimpleKernel, kernel, register_op

CODE_TYPES = ("CORNER", "CENTER_SIZE", "CORNER_SIZE")


def _args(c) -> dict:
    return {"classes": int(c.arg("num_classes")),
            "share": bool(c.arg("share_location", 1)),
            "background": int(c.arg("background_label_id", 0)),
            "nms": float(c.arg("nms_threshold", 0.3)),
            "top_k": int(c.arg("top_k", -1)),
            "eta": float(c.arg("eta", 1.0)),
            "code": str(c.arg("code_type", "CORNER")),
            "encoded": bool(c.arg("variance_encoded_in_target", 0)),
            "keep_top_k": int(c.arg("keep_top_k", -1)),
            "threshold": float(c.arg("confidence_threshold", -np.finfo(np.float32).max))}


def max_rows(a: dict, num: int, priors: int) -> int:
    """Rows of the static output: the most detections the batch can give (at least one per image)."""
    if a["keep_top_k"] > -1:
        per_image = a["keep_top_k"]
    else:
        per_class = priors if a["top_k"] < 0 else min(a["top_k"], priors)
        per_image = per_class * sum(1 for c in range(a["classes"]) if c != a["background"])
    return num * max(per_image, 1)


@register_op("DetectionOutput", layout=Layout.ANY)
class DetectionOutput(OpSpec):
    attrs = {
        "background_label_id": 0, "code_type": "CORNER",
        "confidence_threshold": -float(np.finfo(np.float32).max), "eta": 1.0, "keep_top_k": -1,
        "nms_threshold": 0.3, "num_classes": REQUIRED, "share_location": 1, "top_k": -1,
        "variance_encoded_in_target": 0
    }

    @staticmethod
    def infer(ctx):
        num, priors = ctx.shapes[0][0], int(np.prod(ctx.shapes[2])) // 8
        return [((1, 1, max_rows(_args(ctx), num, priors), 7), np.float32)]


def decode(loc, priors, variances, code: str, encoded: bool) -> np.ndarray:
    """Boxes (P, 4) from offsets (P, 4), priors (P, 4) and their variances (P, 4)."""
    v = np.ones_like(variances) if encoded else variances
    pw, ph = priors[:, 2] - priors[:, 0], priors[:, 3] - priors[:, 1]
    if code == "CORNER":
        return priors + v * loc
    if code == "CORNER_SIZE":
        return priors + v * loc * np.stack([pw, ph, pw, ph], axis=1)
    cx = v[:, 0] * loc[:, 0] * pw + (priors[:, 0] + priors[:, 2]) / 2
    cy = v[:, 1] * loc[:, 1] * ph + (priors[:, 1] + priors[:, 3]) / 2
    w, h = np.exp(v[:, 2] * loc[:, 2]) * pw, np.exp(v[:, 3] * loc[:, 3]) * ph
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def _area(b) -> np.ndarray:
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    return np.where((w < 0) | (h < 0), 0.0, w * h)


def iou(box, others) -> np.ndarray:
    """Jaccard overlap of one box with each of `others` (normalised boxes, no +1)."""
    lo = np.maximum(box[:2], others[:, :2])
    hi = np.minimum(box[2:], others[:, 2:])
    inter = np.clip(hi - lo, 0.0, None).prod(axis=1)
    union = _area(box) + _area(others) - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def candidates(scores, threshold, top_k) -> np.ndarray:
    """Indices above `threshold`, best score first (ties: lower index first), at most top_k."""
    order = np.argsort(-scores, kind="stable")
    order = order[scores[order] > threshold]
    return order[:top_k] if top_k > -1 else order


def nms(boxes, scores, threshold, nms_threshold, eta, top_k) -> list:
    """Indices kept by Caffe's ApplyNMSFast, best score first."""
    order = candidates(scores, threshold, top_k)
    kept, limit = [], nms_threshold
    for i in order:
        if not kept or (iou(boxes[i], boxes[kept]) <= limit).all():
            kept.append(i)
            if eta < 1 and limit > 0.5:
                limit *= eta
    return kept


def detect_image(a: dict, loc, conf, priors, variances, nms=nms) -> list:
    """[(label, score, box)] of one image, in output order (`nms`: a function like nms above)."""
    locs = loc.reshape(len(priors), -1, 4)
    scores = conf.reshape(len(priors), a["classes"])
    found = []
    for c in range(a["classes"]):
        if c == a["background"]:
            continue
        boxes = decode(locs[:, 0 if a["share"] else c], priors, variances, a["code"], a["encoded"])
        found += [(c, float(scores[i, c]), boxes[i]) for i in
                  nms(boxes, scores[:, c], a["threshold"], a["nms"], a["eta"], a["top_k"])]
    if -1 < a["keep_top_k"] < len(found):
        best = sorted(range(len(found)), key=lambda k: -found[k][1])[:a["keep_top_k"]]
        found = [found[k] for k in sorted(best, key=lambda k: (found[k][0], -found[k][1], k))]
    return found


def detection_output(a: dict, loc, conf, prior, rows: int, nms=nms) -> np.ndarray:
    num = loc.shape[0]
    prior = prior.reshape(2, -1, 4).astype(np.float64)
    out = np.full((rows, 7), -1.0)
    r = 0
    per_image = [detect_image(a, loc[i].astype(np.float64), conf[i].astype(np.float64),
                              prior[0], prior[1], nms) for i in range(num)]
    if not any(per_image):   # Caffe's "no detections": one row per image
        out[:num, 0] = np.arange(num)
        return out.reshape(1, 1, rows, 7)
    for i, found in enumerate(per_image):
        for label, score, box in found:
            out[r] = (i, label, score, *box)
            r += 1
    return out.reshape(1, 1, rows, 7)


@kernel("DetectionOutput", "cpu")
class DetectionOutputCpu(SimpleKernel):
    def setup(self, ctx):
        self.a = _args(ctx)
        self.rows = ctx.output_shapes[0][2]

    def compute(self, loc, conf, prior):
        n = loc.shape[0]
        return detection_output(self.a, loc.reshape(n, -1), conf.reshape(n, -1), prior, self.rows)
