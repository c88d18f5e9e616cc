"""numba loop behind the fast Deconv2D (imported only through _jit.op_loops("_deconv_loops")).

col2im as a gather: each output pixel sums the taps that land on it, read from the GEMM's
columns, adds the bias and clips, and is written once. The reference scatters instead (a
zeroed buffer, kh*kw strided adds, a crop copy, a bias pass, an activation pass: five or more
passes over the output); a gather needs no zeroing, no crop and no atomics, so the pool can
split it by output rows. Taps are added in the reference's order (filter row, then column,
from zero), the bias after them: given the same columns, the same bytes.

Options: error_model="numpy", no fastmath (nnan would let the clip drop a NaN the reference
keeps); the channel loops are plain element-wise adds, which LLVM vectorizes without it.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

OPTS = dict(cache=True, nogil=True, error_model="numpy")
PAR = dict(OPTS, parallel=True)


@njit(**OPTS)
def _sources(size, in_size, k, stride, dil, pad):
    """src[o, i]: the input index whose tap i lands on output cell o along one axis, or -1."""
    src = np.full((size, k), -1, np.int64)
    for o in range(size):
        for i in range(k):
            t = o + pad - i * dil
            if t >= 0 and t % stride == 0 and t // stride < in_size:
                src[o, i] = t // stride
    return src


@njit(**OPTS)
def col2im(cols, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, out, r0, r1):
    """Output rows r0:r1 (image-major, of N * OH) of out [N, OH, OW, G * Cg] from cols
    [G, N * H * W, kh * kw * Cg] (input pixel p's tap (i, j) for group g at
    cols[g, p, (i * kw + j) * Cg:][:Cg]): out = clip(sum of the taps landing there + bias).
    Which input row / column feeds each tap is worked out once per call (_sources), so the
    pixel loop only adds contiguous channel runs."""
    groups, cg = cols.shape[0], out.shape[3] // cols.shape[0]
    oh, ow, c = out.shape[1], out.shape[2], out.shape[3]
    rows = _sources(oh, h, kh, sh, dh, pad_t)
    columns = _sources(ow, w, kw, sw, dw, pad_l)
    for r in range(r0, r1):
        n, oy = r // oh, r % oh
        for ox in range(ow):
            dst = out[n, oy, ox]
            dst[:] = 0
            for i in range(kh):
                iy = rows[oy, i]
                if iy < 0:
                    continue
                base = (n * h + iy) * w
                for j in range(kw):
                    ix = columns[ox, j]
                    if ix < 0:
                        continue
                    p = base + ix
                    col = (i * kw + j) * cg
                    for g in range(groups):
                        for k in range(cg):
                            dst[g * cg + k] += cols[g, p, col + k]
            for k in range(c):
                v = dst[k] + bias[k]
                if v < lo:
                    v = lo
                if v > hi:
                    v = hi
                dst[k] = v


@njit(**PAR)
def col2im_par(cols, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, out, parts):
    rows = out.shape[0] * out.shape[1]
    step = (rows + parts - 1) // parts
    for p in prange(parts):
        col2im(cols, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, out,
               min(rows, p * step), min(rows, (p + 1) * step))
