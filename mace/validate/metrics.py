"""Similarity metrics MACE reports: cosine similarity, SQNR, pixel accuracy.

SQNR is reported in dB (10*log10 of signal power over noise power); MACE
prints the linear ratio, which is hard to read at a glance. Pixel accuracy is
the fraction of rows (last axis = classes) whose argmax agrees.

Detection outputs (Caffe's DetectionOutput layout, (1, 1, N, 7) rows of image_id, label,
score, xmin, ymin, xmax, ymax) are compared as sets, as a user reads them: the rows
with a label are matched by image, label and the best box overlap, whatever their
order or the padding rows (-1) after them, and the metrics are computed on the matched
pairs (a detection only one side has is paired with zeros).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class OutputMetrics:
    name: str
    cosine: float
    sqnr_db: float
    pixel_accuracy: float
    max_abs_error: float
    threshold: float
    passed: bool
    compared: int = 0   # values compared: 0 where both sides were empty (nothing checked)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["sqnr"] = d.pop("sqnr_db")
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def cosine(ref: np.ndarray, out: np.ndarray) -> float:
    a, b = ref.astype(np.float64).ravel(), out.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


def sqnr_db(ref: np.ndarray, out: np.ndarray) -> float:
    a, b = ref.astype(np.float64).ravel(), out.astype(np.float64).ravel()
    noise = float(np.sum((a - b) ** 2))
    signal = float(np.sum(a ** 2))
    if noise == 0:
        return math.inf
    return 10.0 * math.log10(signal / noise) if signal > 0 else -math.inf


def pixel_accuracy(ref: np.ndarray, out: np.ndarray) -> float:
    if ref.ndim == 0 or ref.size == 0:
        return 1.0
    a = ref.reshape(-1, ref.shape[-1])
    b = out.reshape(-1, ref.shape[-1])
    return float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))


def is_detections(a: np.ndarray) -> bool:
    return a.ndim == 4 and a.shape[:2] == (1, 1) and a.shape[3] == 7


def _box_iou(a, b) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(w, 0.0) * max(h, 0.0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else float(np.allclose(a, b))


def match_detections(ref, out) -> tuple:
    """(ref rows, our rows) paired up: same image and label, best box overlap first."""
    rows = [a.reshape(-1, 7).astype(np.float64) for a in (ref, out)]
    ref_rows, out_rows = (r[r[:, 1] >= 0] for r in rows)
    if not len(ref_rows) and not len(out_rows):   # no detections on either side
        return rows[0][:1], rows[1][:1]
    free = list(range(len(out_rows)))
    pairs_ref, pairs_out = [], []
    for r in ref_rows[np.argsort(-ref_rows[:, 2], kind="stable")]:
        same = [k for k in free if out_rows[k, 0] == r[0] and out_rows[k, 1] == r[1]]
        best = max(same, key=lambda k: _box_iou(r[3:], out_rows[k, 3:]), default=None)
        if best is not None and _box_iou(r[3:], out_rows[best, 3:]) > 0.5:
            free.remove(best)
            pairs_ref.append(r)
            pairs_out.append(out_rows[best])
        else:
            pairs_ref.append(r)
            pairs_out.append(np.zeros(7))
    for k in free:
        pairs_ref.append(np.zeros(7))
        pairs_out.append(out_rows[k])
    return np.array(pairs_ref), np.array(pairs_out)


def compare(name: str, ref, out, threshold: float) -> OutputMetrics:
    ref, out = np.asarray(ref), np.asarray(out)
    if ref.size == 0 and out.size == 0 and ref.shape == out.shape:
        # an output whose length depends on the data, left empty by both (no box kept)
        return OutputMetrics(name, 1.0, math.inf, 1.0, 0.0, threshold, True, compared=0)
    if ref.size == 0 or out.size == 0:
        if ref.shape != out.shape:
            raise ValueError(f"output '{name}': shape {list(out.shape)} does not match the "
                             f"framework's {list(ref.shape)}")
        raise ValueError(f"output '{name}' is empty")
    if is_detections(ref) and is_detections(out):
        ref, out = match_detections(ref, out)
    if ref.shape != out.shape:
        if ref.size != out.size:
            raise ValueError(f"output '{name}': shape {list(out.shape)} does not match the "
                             f"framework's {list(ref.shape)}")
        out = out.reshape(ref.shape)
    cos = cosine(ref, out)
    err = float(np.max(np.abs(ref.astype(np.float64) - out.astype(np.float64))))
    return OutputMetrics(name, cos, sqnr_db(ref, out), pixel_accuracy(ref, out), err, threshold,
                         cos >= threshold, compared=int(ref.size))
