"""numba loop behind the fast Normalize (imported only through _jit.op_loops("_normalize_loops")):
SSD's L2 normalisation over the channels of each position, in float64 as the reference.

The reference makes a float64 copy, squares it, sums, divides and scales in five full float64
passes and casts back; the loop reads each position's channels twice (sum of squares, then
x / sqrt(sum + eps) * scale) and writes float32 once. The sum runs in order where numpy's is
pairwise: float64 sums that differ in their last bits, so the float32 result is within 1 ulp.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

OPTS = dict(cache=True, nogil=True, error_model="numpy")


@njit(**OPTS)
def l2_rows(x, scale, eps, out, r0, r1):
    """out[r] = x[r] / sqrt(sum(x[r] ** 2) + eps) * scale for rows r0:r1 of x (positions, C)."""
    c = x.shape[1]
    for r in range(r0, r1):
        xr, o = x[r], out[r]
        total = 0.0
        for k in range(c):
            v = np.float64(xr[k])
            total += v * v
        norm = np.sqrt(total + eps)
        for k in range(c):
            o[k] = np.float64(xr[k]) / norm * scale[k]


@njit(**OPTS)
def _part(rows, parts, p):
    step = (rows + parts - 1) // parts
    return min(rows, p * step), min(rows, (p + 1) * step)


@njit(**dict(OPTS, parallel=True))
def l2_rows_par(x, scale, eps, out, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        l2_rows(x, scale, eps, out, r0, r1)
