"""numba loop behind the fast DynamicQuantize (imported only through _jit.op_loops("_quantize_loops")):
ONNX DynamicQuantizeLinear in two passes over x, the range then the codes.

The reference (mace/ops/dynamic_quantize.py) makes seven numpy passes (min, max, divide, rint,
add, clip, cast) and a temporary for each; onnxruntime's quantize_dynamic puts one before every
MatMulInteger (a MiniLM layer: four). The arithmetic is the reference's own, in float32 (the
range widened to hold 0, scale = (hi - lo) / 255, zero = rint(0 - lo / scale), codes rint(x /
scale) + zero, half to even, saturated), so the bytes are the same; a NaN anywhere makes the
reference's range 0 (Python's min(0.0, nan) is 0.0), hence scale 0 and every code 0, and a NaN
code (inf / inf) is 0 as numpy's cast gives it on x86.
"""
from __future__ import annotations

import numpy as np
from numba import njit

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
def dynamic_quantize(x, y, scale_out, zero_out):
    """y = the codes of x (both 1-D, contiguous), scale_out[0] / zero_out[0] their parameters."""
    lo, hi, nan = np.float32(0), np.float32(0), False
    for i in range(x.shape[0]):
        v = x[i]
        if v < lo:
            lo = v
        if v > hi:
            hi = v
        if v != v:
            nan = True
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
