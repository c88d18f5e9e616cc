"""numba loops behind the fast kernels (imported only through _jit.loops()).

Each function writes into a preallocated output and fuses what numpy would do in
separate passes: the taps of a depthwise conv, the bias, the clip of a RELU /
RELUX / CLIP activation (lo, hi = -inf, inf when there is none). The innermost
loop runs over channels, contiguous in NHWC, so LLVM vectorizes it.

Serial on purpose: with parallel=True (prange) numba's thread pool and
OpenBLAS's spinning one fight over the cores between ops; on 2 cores MobileNet
v2 summed 8.5 ms per run (workqueue layer; 281 ms with the OpenMP layer) against
5.1 ms serial.
"""
from __future__ import annotations

import numpy as np
from numba import njit

OPTS = dict(cache=True, fastmath=True, nogil=True)


@njit(**OPTS)
def depthwise(x, w, bias, lo, hi, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, out):
    """out[n, y, x, c] = clip(bias[c] + sum_ij xpad[n, y*sh + i*dh, x*sw + j*dw, c] * w[i, j, c]).

    Zero padding is implicit: taps outside the input are skipped. A 3x3 filter's
    interior pixels (all nine taps inside) are one expression per channel over
    flat [W*C] rows; border pixels, and other filter sizes,
    accumulate tap by tap over the column ranges left.
    """
    n, oh, ow, c = out.shape
    h, wd = x.shape[1], x.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    xf = x.reshape(n, h, wd * c)
    of = out.reshape(n, oh, ow * c)
    w9 = w.reshape(kh * kw, c)
    # output columns whose three taps along W are all inside the input
    a0 = max(0, (pad_l + stride_w - 1) // stride_w)
    a1 = min(ow, (wd - 2 * dil_w + pad_l + stride_w - 1) // stride_w)
    for row in range(n * oh):
        b, oy = row // oh, row % oh
        orow = out[b, oy]
        iy0 = oy * stride_h - pad_t
        if iy0 >= 0 and iy0 + 2 * dil_h < h and kh == 3 and kw == 3 and a1 > a0:
            c0, c1 = a0, a1   # the columns done by the 3x3 interior expression
            # flat [W*C] rows, offsets LLVM can prove non-negative (max(.., 0) and
            # products of shapes): then numba drops its negative-index wraparound and
            # the channel loop vectorizes (112x112x32: 0.32 -> 0.17 ms; a plain
            # `stride_w * c` offset ran 1.0 ms)
            r0, r1, r2 = xf[b, iy0], xf[b, iy0 + dil_h], xf[b, iy0 + 2 * dil_h]
            ofr = of[b, oy]
            step, dil = max(stride_w, 1) * c, max(dil_w, 1) * c
            start = max((a0 * stride_w - pad_l) * c, 0)
            first = max(a0, 0)
            for q in range(a1 - a0):
                k0 = start + q * step
                o0 = (first + q) * c
                for ch in range(c):
                    k = k0 + ch
                    v = (bias[ch] + r0[k] * w9[0, ch] + r0[k + dil] * w9[1, ch]
                         + r0[k + 2 * dil] * w9[2, ch] + r1[k] * w9[3, ch] + r1[k + dil] * w9[4, ch]
                         + r1[k + 2 * dil] * w9[5, ch] + r2[k] * w9[6, ch] + r2[k + dil] * w9[7, ch]
                         + r2[k + 2 * dil] * w9[8, ch])
                    ofr[o0 + ch] = min(max(v, lo), hi)
        else:
            c0, c1 = 0, 0
        # the other pixels, tap by tap: columns [0, c0) and [c1, ow) (all of them
        # when c0 == c1 == 0)
        for seg in range(2):
            s0, s1 = (0, c0) if seg == 0 else (c1, ow)
            for ox in range(s0, s1):
                for ch in range(c):
                    orow[ox, ch] = bias[ch]
            for i in range(kh):
                iy = iy0 + i * dil_h
                if iy < 0 or iy >= h:
                    continue
                xrow = x[b, iy]
                for j in range(kw):
                    off = j * dil_w - pad_l
                    # output columns whose input column ox*sw + off lies in [0, wd)
                    x0 = max(s0, (-off + stride_w - 1) // stride_w)
                    x1 = min(s1, (wd - off + stride_w - 1) // stride_w)
                    wt = w[i, j]
                    for ox in range(x0, x1):
                        xs = xrow[ox * stride_w + off]
                        for ch in range(c):
                            orow[ox, ch] += xs[ch] * wt[ch]
            for ox in range(s0, s1):
                for ch in range(c):
                    orow[ox, ch] = min(max(orow[ox, ch], lo), hi)


@njit(**OPTS)
def bias_clip(out2d, bias, lo, hi):
    """In place: out2d[r, c] = clip(out2d[r, c] + bias[c], lo, hi)."""
    rows, c = out2d.shape
    for r in range(rows):
        orow = out2d[r]
        for ch in range(c):
            orow[ch] = min(max(orow[ch] + bias[ch], lo), hi)



@njit(**OPTS)
def pool(x, is_max, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, scale, out):
    """Max (is_max) or average pooling, NHWC, in one pass over each output row.

    Taps outside the input (padding, ceil_mode's overhang) are skipped: max starts
    at -inf, the average sums what is inside and multiplies by scale[y, x] (1 / the
    window's count, whatever count_include_pad says to count).
    """
    n, oh, ow, c = out.shape
    h, wd = x.shape[1], x.shape[2]
    for row in range(n * oh):
        b, oy = row // oh, row % oh
        orow = out[b, oy]
        start = -np.inf if is_max else 0.0
        for ox in range(ow):
            for ch in range(c):
                orow[ox, ch] = start
        for i in range(kh):
            iy = oy * stride_h - pad_t + i * dil_h
            if iy < 0 or iy >= h:
                continue
            xrow = x[b, iy]
            for j in range(kw):
                off = j * dil_w - pad_l
                x0 = max(0, (-off + stride_w - 1) // stride_w)
                x1 = min(ow, (wd - off + stride_w - 1) // stride_w)
                for ox in range(x0, x1):
                    xs = xrow[ox * stride_w + off]
                    if is_max:
                        for ch in range(c):
                            orow[ox, ch] = max(orow[ox, ch], xs[ch])
                    else:
                        for ch in range(c):
                            orow[ox, ch] += xs[ch]
        if not is_max:
            for ox in range(ow):
                f = scale[oy, ox]
                for ch in range(c):
                    orow[ox, ch] *= f


@njit(**OPTS)
def softmax_rows(x, log, out):
    """Softmax (or log-softmax) of each row of x (rows, k) into out, max-shifted."""
    rows, k = x.shape
    for r in range(rows):
        m = x[r, 0]
        for i in range(1, k):
            m = max(m, x[r, i])
        total = 0.0
        for i in range(k):
            e = np.exp(x[r, i] - m)
            out[r, i] = e
            total += e
        if log:
            shift = m + np.log(total)
            for i in range(k):
                out[r, i] = x[r, i] - shift
        else:
            inv = 1.0 / total
            for i in range(k):
                out[r, i] *= inv


@njit(**OPTS)
def dense_rows(x, w, bias, lo, hi, out):
    """out[r, o] = clip(bias[o] + sum_k x[r, k] * w[o, k]): a small FullyConnected whole."""
    rows, k = x.shape
    for r in range(rows):
        for o in range(w.shape[0]):
            acc = 0.0
            for i in range(k):
                acc += x[r, i] * w[o, i]
            out[r, o] = min(max(acc + bias[o], lo), hi)


@njit(**OPTS)
def conv_direct(x, w, bias, lo, hi, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, out):
    """A whole (tiny) NHWC conv, filter w [kh, kw, C, O], zero padding implicit:
    out[b, y, x, :] = clip(bias + sum_ijc xpad[b, y*sh + i*dh, x*sw + j*dw, c] * w[i, j, c, :])."""
    n, oh, ow, o = out.shape
    h, wd, c = x.shape[1], x.shape[2], x.shape[3]
    kh, kw = w.shape[0], w.shape[1]
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                acc = out[b, oy, ox]
                for q in range(o):
                    acc[q] = bias[q]
                for i in range(kh):
                    iy = oy * stride_h - pad_t + i * dil_h
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = ox * stride_w - pad_l + j * dil_w
                        if ix < 0 or ix >= wd:
                            continue
                        for ch in range(c):
                            v = x[b, iy, ix, ch]
                            wrow = w[i, j, ch]
                            for q in range(o):
                                acc[q] += v * wrow[q]
                for q in range(o):
                    acc[q] = min(max(acc[q], lo), hi)


@njit(**OPTS)
def crop_clip(src, lo, hi, out):
    """out[y, x, c] = clip(src[y, x, c]) for x < out's width: src is computed on a padded width."""
    oh, ow, c = out.shape
    sf = src.reshape(src.shape[0], src.shape[1] * c)
    of = out.reshape(oh, ow * c)
    for y in range(oh):
        s, o = sf[y], of[y]
        for k in range(ow * c):
            o[k] = min(max(s[k], lo), hi)


@njit(**OPTS)
def binary_clip(a, b, code, lo, hi, out):
    """out = clip(a (+ - * min max)[code] b, lo, hi) over flat same-size arrays, one pass."""
    n = out.shape[0]
    if code == 0:
        for i in range(n):
            out[i] = min(max(a[i] + b[i], lo), hi)
    elif code == 1:
        for i in range(n):
            out[i] = min(max(a[i] - b[i], lo), hi)
    elif code == 2:
        for i in range(n):
            out[i] = min(max(a[i] * b[i], lo), hi)
    elif code == 3:
        for i in range(n):
            out[i] = min(max(min(a[i], b[i]), lo), hi)
    else:
        for i in range(n):
            out[i] = min(max(max(a[i], b[i]), lo), hi)


@njit(**OPTS)
def scale_shift_clip(x, scale, offset, lo, hi, out):
    """out[r, c] = clip(x[r, c] * scale[c] + offset[c], lo, hi): BatchNorm in one pass."""
    rows, c = x.shape
    for r in range(rows):
        xr, orow = x[r], out[r]
        for ch in range(c):
            orow[ch] = min(max(xr[ch] * scale[ch] + offset[ch], lo), hi)
