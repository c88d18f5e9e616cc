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
def _sources(first, size, in_size, k, stride, dil, pad):
    """src[o, i]: the input index whose tap i lands on output cell first + o along one axis, or -1."""
    src = np.full((size, k), -1, np.int64)
    for o in range(size):
        for i in range(k):
            t = first + o + pad - i * dil
            if t >= 0 and t % stride == 0 and t // stride < in_size:
                src[o, i] = t // stride
    return src


@njit(**OPTS)
def _column_ranges(ow, w, kw, sw, dw, pad_l):
    """spans[j] = (ix0, ix1): tap column j of input columns ix0:ix1 lands on output column
    ix * sw + j * dw - pad_l, inside 0:ow."""
    spans = np.zeros((kw, 2), np.int64)
    for j in range(kw):
        off = j * dw - pad_l
        ix0 = max(0, (-off + sw - 1) // sw)
        ix1 = min(w, (ow - 1 - off) // sw + 1) if ow - 1 - off >= 0 else 0
        spans[j, 0], spans[j, 1] = ix0, max(ix0, ix1)
    return spans


@njit(inline="always", **OPTS)
def _bias_clip_row(out, r, bias, lo, hi, slope):
    """out[r] = clip(out[r] + bias), negatives times `slope` (a fused LEAKYRELU; 1: none, the
    product then exact); a NaN stays NaN."""
    c = out.shape[2]
    for ox in range(out.shape[1]):
        for k in range(c):
            v = out[r, ox, k] + bias[k]
            if v < lo:
                v = lo
            if v > hi:
                v = hi
            if v < 0:
                v = v * slope
            out[r, ox, k] = v


@njit(**OPTS)
def col2im(cols, ring, oy0, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, slope, out,
           r0, r1):
    """Rows r0:r1 of out [rows, OW, G * Cg], output rows oy0 + r of one image, from cols
    [G, ring * W, kh * kw * Cg]: input row iy's pixel ix tap (i, j) for group g at
    cols[g, (iy % ring) * W + ix, (i * kw + j) * Cg:][:Cg] (the kernel keeps the last `ring`
    input rows there); out = clip(sum of the taps landing there + bias), negatives times
    slope. Which input row feeds each tap row, and which input columns each tap column, is
    worked out once per call (_sources, _column_ranges), so the loops only add channel runs."""
    groups, cg = cols.shape[0], out.shape[2] // cols.shape[0]
    ow, c = out.shape[1], out.shape[2]
    rows = _sources(oy0 + r0, r1 - r0, h, kh, sh, dh, pad_t)
    spans = _column_ranges(ow, w, kw, sw, dw, pad_l)
    for r in range(r0, r1):
        out[r] = 0
        for i in range(kh):   # each pixel gets its taps in the reference's (i, j) order
            iy = rows[r - r0, i]
            if iy < 0:
                continue
            base = (iy % ring) * w
            for j in range(kw):
                col, off = (i * kw + j) * cg, j * dw - pad_l
                for ix in range(spans[j, 0], spans[j, 1]):
                    ox = ix * sw + off
                    for g in range(groups):
                        for k in range(cg):
                            out[r, ox, g * cg + k] += cols[g, base + ix, col + k]
        _bias_clip_row(out, r, bias, lo, hi, slope)


@njit(**PAR)
def col2im_par(cols, ring, oy0, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, slope, out,
               parts):
    rows = out.shape[0]
    step = (rows + parts - 1) // parts
    for p in prange(parts):
        col2im(cols, ring, oy0, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, slope, out,
               min(rows, p * step), min(rows, (p + 1) * step))


@njit(**OPTS)
def direct(x, wt, og, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, slope, out, r0, r1):
    """Rows r0:r1 of out [OH, OW, G * og] of one image x [H, W, G] when each group has one
    input channel (a depthwise deconv; og outputs per group), with no GEMM: each output pixel
    sums x[iy, ix, g] * wt[i, j, g * og + k] over the taps landing there, in the reference's
    order (its columns are the same float32 products), then adds the bias and clips."""
    c, ow = out.shape[2], out.shape[1]
    groups = c // og
    rows = _sources(r0, r1 - r0, h, kh, sh, dh, pad_t)
    spans = _column_ranges(ow, w, kw, sw, dw, pad_l)
    for r in range(r0, r1):
        out[r] = 0
        for i in range(kh):
            iy = rows[r - r0, i]
            if iy < 0:
                continue
            for j in range(kw):
                off = j * dw - pad_l
                if c == 1:   # one channel (wechat_qr_sr's last layer): no channel loop to enter
                    tap = wt[i, j, 0]
                    for ix in range(spans[j, 0], spans[j, 1]):
                        out[r, ix * sw + off, 0] += x[iy, ix, 0] * tap
                    continue
                for ix in range(spans[j, 0], spans[j, 1]):
                    ox = ix * sw + off
                    if og == 1:
                        for k in range(c):
                            out[r, ox, k] += x[iy, ix, k] * wt[i, j, k]
                    else:
                        for g in range(groups):
                            xg = x[iy, ix, g]
                            for k in range(og):
                                out[r, ox, g * og + k] += xg * wt[i, j, g * og + k]
        _bias_clip_row(out, r, bias, lo, hi, slope)


@njit(**PAR)
def direct_par(x, wt, og, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, slope, out, parts):
    rows = out.shape[0]
    step = (rows + parts - 1) // parts
    for p in prange(parts):
        direct(x, wt, og, h, w, kh, kw, sh, sw, dh, dw, pad_t, pad_l, bias, lo, hi, slope, out,
               min(rows, p * step), min(rows, (p + 1) * step))
