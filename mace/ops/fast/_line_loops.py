"""numba loops behind the fast DepthwiseConv2d of a 1-D conv written as 2-D (imported only
through _jit.op_loops("_line_loops")).

Keras' streaming and 1-D layers reach us as NHWC convs whose W (or H) is 1 and whose filter is
1 along it: microWakeWord's depthwise convs are [1, 13, 1, 60] inputs with 13 x 1 filters, one
output pixel a run. _loops.depthwise takes them through its tap-by-tap border path, a view per
tap and a 2-D index per channel: ~1 us a call, 0.5 of it past the call itself. Here the line is
[n, L, C] flat, each output row's C channels one contiguous run per tap over unsigned offsets
(numba keeps a signed index's wraparound check in the loop, which stops the vectorizer): 0.57 -
0.67 us for the same calls. No fastmath: each tap's product and sum round as the numpy
reference's do, in its tap order, so the bytes are the reference's (the general loop contracts
them into fused multiply-adds).
Clip activations only (lo, hi): a fused activation with a store loop stays on _loops.depthwise.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

OPTS = dict(cache=True, nogil=True, error_model="numpy")
PAR = dict(OPTS, parallel=True)


@njit(**OPTS)
def depthwise_line(x, w, bias, lo, hi, stride, dil, pad, out, r0, r1):
    """Output rows r0:r1 (image-major over [n, OL]) of a depthwise conv along one axis:
    out[b, o, c] = clip(bias[c] + sum_i x[b, o * stride - pad + i * dil, c] * w[i, c], lo, hi),
    taps outside [0, L) skipped (zero padding). x [n, L, C], w [k, C], out [n, OL, C]."""
    n, length, c = x.shape
    ol, k = out.shape[1], w.shape[0]
    xf, wf, of = x.reshape(-1), w.reshape(-1), out.reshape(-1)
    uc = np.uint64(c)
    for row in range(r0, r1):
        b, o = row // ol, row % ol
        at = np.uint64(row) * uc
        for ch in range(uc):
            of[at + ch] = bias[ch]
        first = o * stride - pad
        for i in range(k):
            iy = first + i * dil
            if iy < 0 or iy >= length:
                continue
            src, tap = np.uint64(b * length + iy) * uc, np.uint64(i) * uc
            for ch in range(uc):
                of[at + ch] += xf[src + ch] * wf[tap + ch]
        for ch in range(uc):
            of[at + ch] = min(max(of[at + ch], lo), hi)


@njit(**PAR)
def depthwise_line_par(x, w, bias, lo, hi, stride, dil, pad, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        step = (rows + parts - 1) // parts
        depthwise_line(x, w, bias, lo, hi, stride, dil, pad, out, min(p * step, rows), min((p + 1) * step, rows))
