"""numba loops around the fast MatMulInteger's float GEMM (imported only through
_jit.op_loops("_integer_loops")): 8-bit codes minus a run-time zero point into float32, and the
GEMM's integral float32 sums back into int32. Both conversions are exact: a code minus a zero
point is an integer in [-255, 255], and every float32 the GEMM can produce from integer
operands is an integer (at or above 2^24 every float32 is one)."""
from __future__ import annotations

import numpy as np
from numba import njit

OPTS = dict(cache=True, nogil=True, error_model="numpy")


@njit(**OPTS)
def centre_codes(a, zero, out):
    """out = float32(a) - float32(zero[0]) (a, out 1-D, contiguous; zero one 8-bit value)."""
    z = np.float32(zero[0])
    for i in range(a.shape[0]):
        out[i] = np.float32(a[i]) - z


@njit(**OPTS)
def integral_to_int32(x, out):
    """out = int32(x) for integral float32 x within int32's range (x, out 1-D, contiguous)."""
    for i in range(x.shape[0]):
        out[i] = np.int32(x[i])
