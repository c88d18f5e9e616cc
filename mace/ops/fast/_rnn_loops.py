"""numba loops behind the fast LSTM and GRU (imported only through _jit.op_loops("_rnn_loops")).

The input projection of every time step is one GEMM before these loops (fast/lstm.py,
fast/gru.py); what is left is the recurrence, sequential in time: per step and batch row, the
state times R^T (a loop over the hidden units adding rows of R^T, vectorized over the gates'
columns, summed from zero in unit order like a GEMV), then the gates element-wise. The
reference ran that as one small np.matmul and ~15 numpy calls per step (oww_hey_mycroft:
96% of its run in 16 steps of a 64-unit LSTM).

Sigmoid and tanh run over a step's gate vector at once (_squash), as float64 arithmetic LLVM
vectorizes: tanh(y) = (1 - e) / (1 + e) with e = exp(-2|y|), exp by a Cody-Waite reduction to
|r| <= ln2 / 2, a degree-11 Taylor polynomial (relative error ~1e-15) and 2**n built from its bits
(libm's tanh was one scalar call of ~20 ns per gate: two thirds of a 64-unit LSTM step), then
rounded once to float32; sigmoid(x) = 0.5 * tanh(x / 2) + 0.5, the references' formula. The
references' float32 numpy tanh is within 1-2 ulp of that. The gate arithmetic is float32 in the
references' order. error_model="numpy" and no fastmath: NaN and inf pass as in the
references, and no FMA contraction of the gate products.
"""
from __future__ import annotations

import numpy as np
from numba import njit

OPTS = dict(cache=True, nogil=True, error_model="numpy")


LOG2E = 1.4426950408889634
LN2_HI = 0.6931471803691238   # ln 2 in two parts: n * LN2_HI is exact for |n| < 2**20
LN2_LO = 1.9082149292705877e-10
TANH_SATURATES = 20.0          # tanh(20) is 1 in float32 (and exp(-40) still a normal float64)


@njit(**OPTS)
def _squash(v, at, m, half, work, bits):
    """v[at:at + m] = tanh(v) in place, or (half) sigmoid(v) = 0.5 * tanh(v / 2) + 0.5; work
    (float64, at least 2m) and bits (int64, at least m) are scratch. Two passes LLVM
    vectorizes: the second reads its inputs from scratch, not v (a loop reading and writing
    one array fails LLVM's overlap check and runs scalar; so did a sliced v, compiled as a
    maybe-strided array: ~8 instead of ~3 ns an element)."""
    scale = 0.5 if half else 1.0
    for i in range(m):   # e = exp(z), z = -2|y| in [-40, 0]: z = n ln2 + r, e = 2**n * p(r)
        x = np.float64(v[at + i]) * scale
        y = abs(x)
        if y > TANH_SATURATES:
            y = TANH_SATURATES
        z = -2.0 * y
        n = np.floor(z * LOG2E + 0.5)
        r = (z - n * LN2_HI) - n * LN2_LO
        p = 1.0 + r * (1.0 + r * (1 / 2 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r * (
            1 / 720 + r * (1 / 5040 + r * (1 / 40320 + r * (1 / 362880 + r * (
                1 / 3628800 + r * (1 / 39916800)))))))))))
        work[i] = p
        work[m + i] = x
        bits[i] = (np.int64(n) + 1023) << 52
    powers = bits[:m].view(np.float64)
    for i in range(m):
        x = work[m + i]
        q = work[i] * powers[i]
        t = (1.0 - q) / (1.0 + q)
        if x < 0:
            t = -t
        if x != x:   # NaN in, NaN out (its exponent bits above are meaningless)
            t = x
        v[at + i] = np.float32(0.5 * t + 0.5) if half else np.float32(t)


@njit(inline="always", **OPTS)
def _bound(x, clip):
    """x clamped to [-clip, clip] (clip 0: as it is); a NaN stays NaN."""
    if clip > 0:
        if x < -clip:
            return -clip
        if x > clip:
            return clip
    return x


@njit(inline="always", **OPTS)
def _times_rt(h, rt, col0, cols, acc):
    """acc[col0:col0 + cols] = h @ rt[:, col0:col0 + cols], summed from zero in row order. Four rows a
    pass, added left to right (the same order, the same bytes as one a pass): acc is loaded
    and stored a quarter as often (a 64 x 256 product 4.7 -> 2.8 us)."""
    for j in range(col0, col0 + cols):
        acc[j] = 0
    n, k = h.shape[0], 0
    while k + 4 <= n:
        h0, h1, h2, h3 = h[k], h[k + 1], h[k + 2], h[k + 3]
        for j in range(col0, col0 + cols):
            acc[j] = acc[j] + h0 * rt[k, j] + h1 * rt[k + 1, j] + h2 * rt[k + 2, j] + h3 * rt[k + 3, j]
        k += 4
    while k < n:
        hk = h[k]
        for j in range(col0, col0 + cols):
            acc[j] += hk * rt[k, j]
        k += 1


@njit(**OPTS)
def lstm(xw, rt, p, h0, c0, reverse, clip, y, yh, yc):
    """One direction: xw [seq, batch, 4n] (x @ W^T + Wb + Rb, gates i, o, f, c), rt [n, 4n]
    (R^T), p [3n] (peepholes i, o, f), h0 / c0 [batch, n]; writes y [seq, batch, n] and the
    last states yh / yc [batch, n] (which hold the running state)."""
    seq, batch, n = xw.shape[0], xw.shape[1], rt.shape[0]
    clip = np.float32(clip)
    acc = np.empty(4 * n, np.float32)
    a = np.empty(3 * n, np.float32)    # i, f then tanh(c~); later o, then tanh(c)
    e, bits = np.empty(6 * n), np.empty(3 * n, np.int64)
    yh[:, :] = h0
    yc[:, :] = c0
    for s in range(seq):
        t = seq - 1 - s if reverse else s
        for b in range(batch):
            h, c, g = yh[b], yc[b], xw[t, b]
            _times_rt(h, rt, 0, 4 * n, acc)
            for j in range(n):
                a[j] = _bound((g[j] + acc[j]) + p[j] * c[j], clip)
                a[n + j] = _bound((g[2 * n + j] + acc[2 * n + j]) + p[2 * n + j] * c[j], clip)
                a[2 * n + j] = _bound(g[3 * n + j] + acc[3 * n + j], clip)
            _squash(a, 0, 2 * n, True, e, bits)
            _squash(a, 2 * n, n, False, e, bits)
            for j in range(n):
                c[j] = a[n + j] * c[j] + a[j] * a[2 * n + j]
                a[j] = _bound((g[n + j] + acc[n + j]) + p[n + j] * c[j], clip)
                a[n + j] = c[j]
            _squash(a, 0, n, True, e, bits)
            _squash(a, n, n, False, e, bits)
            for j in range(n):
                h[j] = a[j] * a[n + j]
            y[t, b] = h


@njit(**OPTS)
def gru(xw, rt, rb, h0, reverse, clip, linear_before_reset, y, yh):
    """One direction: xw [seq, batch, 3n] (x @ W^T + Wb, gates z, r, h), rt [n, 3n] (R^T), rb
    [3n] (R's bias), h0 [batch, n]; writes y [seq, batch, n] and the last state yh [batch, n]
    (which holds the running state). linear_before_reset: the reset gate scales
    (h @ Rh^T + Rbh); else it scales h before Rh."""
    seq, batch, n = xw.shape[0], xw.shape[1], rt.shape[0]
    clip = np.float32(clip)
    acc = np.empty(3 * n, np.float32)
    a = np.empty(3 * n, np.float32)    # z, r, then the candidate
    rh = np.empty(n, np.float32)
    e, bits = np.empty(4 * n), np.empty(2 * n, np.int64)
    cols = 3 * n if linear_before_reset else 2 * n
    yh[:, :] = h0
    for s in range(seq):
        t = seq - 1 - s if reverse else s
        for b in range(batch):
            h, g = yh[b], xw[t, b]
            _times_rt(h, rt, 0, cols, acc)
            for j in range(2 * n):
                a[j] = _bound((g[j] + acc[j]) + rb[j], clip)
            _squash(a, 0, 2 * n, True, e, bits)
            if linear_before_reset:
                for j in range(n):
                    a[2 * n + j] = g[2 * n + j] + a[n + j] * (acc[2 * n + j] + rb[2 * n + j])
            else:
                for j in range(n):
                    rh[j] = a[n + j] * h[j]
                _times_rt(rh, rt, 2 * n, n, acc)
                for j in range(n):
                    a[2 * n + j] = (g[2 * n + j] + acc[2 * n + j]) + rb[2 * n + j]
            for j in range(n):
                a[2 * n + j] = _bound(a[2 * n + j], clip)
            _squash(a, 2 * n, n, False, e, bits)
            for j in range(n):
                h[j] = (np.float32(1) - a[j]) * a[2 * n + j] + a[j] * h[j]
            y[t, b] = h
