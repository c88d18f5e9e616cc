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
def zero_correction(base, zero, out):
    """out = -int64(zero[0]) * base (int64): the int8 tile's correction of its sums for A's zero
    point known only at run time (_qgemm's set_x_zero, as a step a chain calls: that was a Python
    call of ~1.7 us per MatMulInteger, 18 a MiniLM run)."""
    z = -np.int64(zero[0])
    for i in range(base.shape[0]):
        out[i] = z * base[i]


@njit(**OPTS)
def integral_to_int32(x, out):
    """out = int32(x) for integral float32 x within int32's range (x, out 1-D, contiguous)."""
    for i in range(x.shape[0]):
        out[i] = np.int32(x[i])


@njit(**OPTS)
def scale_sums(acc, scale, bias, out):
    """out = float32(acc) * scale (+ bias) over rows of acc (rows, n; int32 sums, or float32 ones
    that are integers): the Cast, Mul and Add a scaled MatMulInteger stands for, each rounded in
    float32 (no fast-math: no FMA contraction). scale: 1 or n floats; bias: 0 or n floats."""
    rows, n = acc.shape
    one = scale.shape[0] == 1
    s0 = scale[0]
    for r in range(rows):
        a, o = acc[r], out[r]
        if one:
            for j in range(n):
                o[j] = np.float32(a[j]) * s0
        else:
            for j in range(n):
                o[j] = np.float32(a[j]) * scale[j]
        if bias.shape[0]:
            for j in range(n):
                o[j] = o[j] + bias[j]
