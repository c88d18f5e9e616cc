"""The quantization scheme: uint8 asymmetric activations, int8/uint8 weights, int32 bias.

    real = scale * (q - zero_point)

* Activations: uint8, asymmetric; the range always contains 0 and 0.0 is exactly
  representable (zero_point is an integer in [0, 255]).
* Weights: per-channel int8 symmetric (zero_point 0, range [-127, 127]) along the
  output-channel axis where the kernel supports it, otherwise per-tensor uint8
  asymmetric.
* Bias: int32 with scale = input_scale * weight_scale (per channel), zero_point 0.
* Requantization: an int32 accumulator times a real multiplier
  (in_scale * w_scale / out_scale) done as an integer multiplier M in [2^30, 2^31)
  and a right shift, rounding half up. No float touches the values, so results are
  bit-exact on every machine.

Accumulators may be computed with float64 GEMM (BLAS): every operand is a small
integer and every partial sum an integer below 2^53, so float64 arithmetic is exact
in any summation order and the result equals the int32 accumulation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UINT8_MIN, UINT8_MAX = 0, 255
INT8_WEIGHT_MAX = 127          # symmetric weights use [-127, 127]
MIN_RANGE = 1e-6               # a constant-zero tensor still gets a usable scale


@dataclass(frozen=True)
class QuantParams:
    """How a tensor's integers map to reals. Per-channel when `axis` is not None."""

    scale: float | np.ndarray
    zero_point: int | np.ndarray
    minval: float = 0.0
    maxval: float = 0.0
    dtype: np.dtype = np.dtype(np.uint8)
    axis: int | None = None

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    def broadcast(self, values, rank: int):
        """`values` (per-channel vector or scalar) shaped to broadcast along `axis`."""
        if self.axis is None:
            return values
        shape = [1] * rank
        shape[self.axis] = -1
        return np.asarray(values).reshape(shape)


def activation_params(lo: float, hi: float) -> QuantParams:
    """uint8 asymmetric parameters for the range [lo, hi], nudged so 0.0 is exact."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < MIN_RANGE:
        hi = lo + MIN_RANGE
    scale = np.float32((hi - lo) / UINT8_MAX)
    zero = int(np.clip(round(-lo / float(scale)), UINT8_MIN, UINT8_MAX))
    return QuantParams(float(scale), zero, -zero * float(scale), (UINT8_MAX - zero) * float(scale))


def weight_params(w: np.ndarray, axis: int | None) -> QuantParams:
    """Per-channel int8 symmetric (axis given) or per-tensor uint8 asymmetric parameters."""
    if axis is None:
        return activation_params(float(w.min(initial=0.0)), float(w.max(initial=0.0)))
    other = tuple(i for i in range(w.ndim) if i != axis)
    peak = np.abs(w).max(axis=other) if w.size else np.zeros(w.shape[axis])
    scale = (np.maximum(peak, MIN_RANGE) / INT8_WEIGHT_MAX).astype(np.float32)
    return QuantParams(scale, np.zeros(len(scale), np.int32), float(-peak.max(initial=0)),
                       float(peak.max(initial=0)), np.dtype(np.int8), axis)


def quantize(x: np.ndarray, p: QuantParams) -> np.ndarray:
    """Round real values to p's integers (round half to even, saturating)."""
    info = np.iinfo(p.dtype)
    lo = -INT8_WEIGHT_MAX if p.dtype == np.int8 else info.min
    scale = p.broadcast(np.asarray(p.scale, np.float64), x.ndim)
    zero = p.broadcast(np.asarray(p.zero_point, np.float64), x.ndim)
    q = np.rint(np.asarray(x, np.float64) / scale) + zero
    return np.clip(q, lo, info.max).astype(p.dtype)


def dequantize(q: np.ndarray, p: QuantParams) -> np.ndarray:
    scale = p.broadcast(np.asarray(p.scale, np.float32), q.ndim)
    zero = p.broadcast(np.asarray(p.zero_point, np.int32), q.ndim)
    return ((q.astype(np.int32) - zero) * scale).astype(np.float32)


def bias_params(input_scale: float, w: QuantParams) -> QuantParams:
    scale = (np.float64(input_scale) * np.asarray(w.scale, np.float64)).astype(np.float32)
    zero = np.zeros(np.shape(scale), np.int32) if np.ndim(scale) else 0
    return QuantParams(scale if np.ndim(scale) else float(scale), zero, dtype=np.dtype(np.int32),
                       axis=0 if np.ndim(scale) else None)


def quantize_bias(b: np.ndarray, input_scale: float, w: QuantParams) -> tuple:
    """(int32 bias, its QuantParams) for a layer with input scale `input_scale`."""
    p = bias_params(input_scale, w)
    q = np.rint(np.asarray(b, np.float64) / np.asarray(p.scale, np.float64))
    return np.clip(q, -2**31, 2**31 - 1).astype(np.int32), p


def quantize_multiplier(real) -> tuple:
    """Real multiplier(s) > 0 as (M, shift): real ~= M * 2**-shift, M in [2^30, 2^31).

    Works on scalars and arrays (per-channel); returns int64 arrays/ints.
    """
    real = np.asarray(real, np.float64)
    if np.any(real <= 0):
        raise ValueError("requantization multiplier must be positive")
    mant, exp = np.frexp(real)                       # real = mant * 2**exp, mant in [0.5, 1)
    m = np.rint(mant * (1 << 31)).astype(np.int64)
    carry = m == (1 << 31)                           # mantissa rounded up to 1.0
    m = np.where(carry, m >> 1, m)
    exp = np.where(carry, exp + 1, exp)
    shift = (31 - exp).astype(np.int64)
    if real.ndim == 0:
        return int(m), int(shift)
    return m, shift


def requantize(acc: np.ndarray, multiplier, shift, zero_point: int, out: np.ndarray,
               qmin: int = UINT8_MIN, qmax: int = UINT8_MAX) -> np.ndarray:
    """out = clamp(zero_point + round(acc * M / 2**shift), qmin, qmax), in integers only.

    `acc` holds integer accumulators (int32/int64, or float64 holding exact integers);
    `multiplier`/`shift` are scalars or arrays broadcasting against `acc` (per channel on
    the last axis). Rounding is half up; `qmin`/`qmax` also apply a fused ReLU/ReLU6.
    """
    a = acc if acc.dtype == np.int64 else acc.astype(np.int64)
    np.clip(a, -2**31, 2**31 - 1, out=a)             # the accumulator is int32 by definition
    m = np.asarray(multiplier, np.int64)
    s = np.asarray(shift, np.int64)
    if np.any(s < 1):  # multiplier >= 2**30: pre-shift left (rare: out scale << in scale)
        left = np.maximum(1 - s, 0)
        a = a << left
        s = s + left
    prod = a * m                                     # |a| < 2^31+, m < 2^31: fits int64
    res = (prod + (np.int64(1) << (s - 1))) >> s
    res += zero_point
    np.clip(res, qmin, qmax, out=res)
    out[...] = res
    return out


def activation_clamp(act: str, p: QuantParams, max_limit: float = 0.0) -> tuple:
    """(qmin, qmax) realising a fused RELU / RELUX (ReLU6) / NOOP in the output's integers."""
    qmin, qmax = UINT8_MIN, UINT8_MAX
    if act in ("RELU", "RELUX"):
        qmin = max(qmin, int(p.zero_point))
    if act == "RELUX":
        qmax = min(qmax, int(p.zero_point) + int(np.rint(max_limit / p.scale)))
    elif act not in ("", "NOOP", "RELU", None):
        raise ValueError(f"fused activation {act} has no quantized form (RELU/RELUX only)")
    return qmin, qmax


def params_from_info(info) -> QuantParams:
    """QuantParams of an activation from the IR's QuantizeActivationInfo."""
    return QuantParams(float(info.scale), int(info.zero_point), float(info.minval), float(info.maxval))


def fill_info(info, p: QuantParams) -> None:
    """Write per-tensor params into a QuantizeActivationInfo."""
    info.scale, info.zero_point, info.minval, info.maxval = p.scale, p.zero_point, p.minval, p.maxval
