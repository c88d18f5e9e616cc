"""numba loops behind the fast DynamicQuantize (imported only through _jit.op_loops("_quantize_loops")):
ONNX DynamicQuantizeLinear in two passes over x, the range then the codes.

The reference (mace/ops/dynamic_quantize.py) makes seven numpy passes (min, max, divide, rint,
add, clip, cast) and a temporary for each; onnxruntime's quantize_dynamic puts one before every
MatMulInteger (a MiniLM layer: four). The arithmetic is the reference's own, in float32 (the
range widened to hold 0, scale = (hi - lo) / 255, zero = rint(0 - lo / scale), codes rint(x /
scale) + zero, half to even, saturated), so the bytes are the same; a NaN anywhere makes the
reference's range 0 (Python's min(0.0, nan) is 0.0), hence scale 0 and every code 0, and a NaN
code (inf / inf) is 0 as numpy's cast gives it on x86.
numba caches these loops under this file's stamp only: after editing _act_loops.py's
_f32_from_bits or ordered_key, touch this file.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from mace.ops.fast._act_loops import _f32_from_bits, ordered_key as _key

OPTS = dict(cache=True, nogil=True, error_model="numpy")


@njit(inline="always", **OPTS)
def _code(q):
    """A float code saturated to uint8 (NaN: 0)."""
    if not q >= 0:
        return np.uint8(0)
    if q > 255:
        return np.uint8(255)
    return np.uint8(q)


@njit(**OPTS)
def _range(x):
    """(lo, hi, nan): min(0, min x), max(0, max x) as the reference's Python min / max give them
    (+0.0 where x has only -0.0 below it), and whether x holds a NaN."""
    kmin, kmax = np.int32(0), np.int32(0)
    bits = x.view(np.int32)
    for i in range(bits.shape[0]):
        k = _key(bits[i])
        kmin = min(kmin, k)
        kmax = max(kmax, k)
    # a NaN's key lies above +inf's (0x7f800000) or below -inf's (-1 - 0x7f800000)
    nan = kmax > np.int32(0x7f800000) or kmin < np.int32(-0x7f800001)
    lo, hi = _f32_from_bits(_key(kmin)), _f32_from_bits(_key(kmax))
    return (lo if lo < 0 else np.float32(0)), hi, nan


@njit(**OPTS)
def dynamic_quantize(x, y, scale_out, zero_out):
    """y = the codes of x (both 1-D, contiguous), scale_out[0] / zero_out[0] their parameters."""
    lo, hi, nan = _range(x)
    if nan:
        lo, hi = np.float32(0), np.float32(0)
    scale = (hi - lo) / np.float32(255)
    scale_out[0] = scale
    if scale == 0:
        zero_out[0] = 0
        y[:] = 0
        return
    zero = _code(np.rint(np.float32(0) - lo / scale))
    zero_out[0] = zero
    zf = np.float32(zero)
    for i in range(x.shape[0]):
        y[i] = _code(np.rint(x[i] / scale) + zf)
