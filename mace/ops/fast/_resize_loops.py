"""numba loops behind the fast ResizeNearestNeighbor / ResizeBilinear (imported only through
_jit.op_loops("_resize_loops")).

Both are gathers over NHWC rows of the output, each output pixel written once. The references
gather with np.take twice (rows, then columns), and bilinear adds two multiplies and an add as
full passes over each intermediate: six passes over the output, with a row-resized
intermediate as large as it. Bilinear blends in the reference's order, in float32, with no
fused multiply-add: rows first, (top * w_top + bottom * w_bottom), then columns, (left * w_left
+ right * w_right): the same bytes.

Options: error_model="numpy", no fastmath (contracting the blends into FMAs would change the
bytes); the channel loops are plain element-wise expressions, which LLVM vectorizes without it.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

OPTS = dict(cache=True, nogil=True, error_model="numpy")
PAR = dict(OPTS, parallel=True)


@njit(**OPTS)
def nearest(x, rows, cols, out, r0, r1):
    """out[b, i, j] = x[b, rows[i], cols[j]] for output rows r0:r1 of the n * oh rows."""
    oh, ow, c = out.shape[1], out.shape[2], out.shape[3]
    for r in range(r0, r1):
        b, i = r // oh, r % oh
        src, dst = x[b, rows[i]], out[b, i]
        for j in range(ow):
            s, d = src[cols[j]], dst[j]
            for k in range(c):
                d[k] = s[k]


@njit(**OPTS)
def bilinear(x, rows, row_w, cols, col_w, out, r0, r1):
    """out[b, i, j] blends x's rows rows[i, 0:2] (weights row_w[i, 0:2]) and columns cols[j, 0:2]
    (col_w[j, 0:2]), over output rows r0:r1 of the n * oh rows."""
    oh, ow, w, c = out.shape[1], out.shape[2], x.shape[2], out.shape[3]
    blended = np.empty((w, c), np.float32)   # the output row's two source rows, blended once
    for r in range(r0, r1):
        b, i = r // oh, r % oh
        top, bottom, dst = x[b, rows[i, 0]], x[b, rows[i, 1]], out[b, i]
        wt, wb = row_w[i, 0], row_w[i, 1]
        for q in range(w):
            t, u, v = top[q], bottom[q], blended[q]
            for k in range(c):
                v[k] = t[k] * wt + u[k] * wb
        for j in range(ow):
            left, right, d = blended[cols[j, 0]], blended[cols[j, 1]], dst[j]
            wl, wr = col_w[j, 0], col_w[j, 1]
            for k in range(c):
                d[k] = left[k] * wl + right[k] * wr


@njit(**OPTS)
def _part(rows, parts, p):
    step = (rows + parts - 1) // parts
    return min(rows, p * step), min(rows, (p + 1) * step)


@njit(**PAR)
def nearest_par(x, rows, cols, out, parts):
    n = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(n, parts, p)
        nearest(x, rows, cols, out, r0, r1)


@njit(**PAR)
def bilinear_par(x, rows, row_w, cols, col_w, out, parts):
    n = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(n, parts, p)
        bilinear(x, rows, row_w, cols, col_w, out, r0, r1)
