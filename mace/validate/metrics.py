"""Similarity metrics MACE reports: cosine similarity, SQNR, pixel accuracy.

SQNR is reported in dB (10*log10 of signal power over noise power); MACE
prints the linear ratio, which is hard to read at a glance. Pixel accuracy is
the fraction of rows (last axis = classes) whose argmax agrees.
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


def compare(name: str, ref, out, threshold: float) -> OutputMetrics:
    ref, out = np.asarray(ref), np.asarray(out)
    if ref.size == 0 or out.size == 0:
        raise ValueError(f"output '{name}' is empty")
    if ref.shape != out.shape:
        if ref.size != out.size:
            raise ValueError(f"output '{name}': shape {list(out.shape)} does not match the "
                             f"framework's {list(ref.shape)}")
        out = out.reshape(ref.shape)
    cos = cosine(ref, out)
    err = float(np.max(np.abs(ref.astype(np.float64) - out.astype(np.float64))))
    return OutputMetrics(name, cos, sqnr_db(ref, out), pixel_accuracy(ref, out), err, threshold,
                         cos >= threshold)
