"""numba loops behind the fast LSTM and GRU (imported only through _jit.op_loops("_rnn_loops")).

The input projection of every time step is one GEMM before these loops (fast/lstm.py,
fast/gru.py); what is left is the recurrence, sequential in time: per step and batch row, the
state times R^T (a loop over the hidden units adding rows of R^T, vectorized over the gates'
columns, summed from zero in unit order like a GEMV), then the gates element-wise. The
reference ran that as one small np.matmul and ~15 numpy calls per step (oww_hey_mycroft:
96% of its run in 16 steps of a 64-unit LSTM).

Sigmoid and tanh run over a step's gate vector at once (_squash), in float32 arithmetic LLVM
vectorizes 16 lanes wide: tanh(x) as an odd rational function of x (degree 13 over degree 6 in
x, the coefficients of Eigen's float tanh: numbers, not code) on x clamped to +-7.9053 (where it
rounds to +-1), sigmoid(x) = 0.5 * tanh(x / 2) + 0.5, the references' formula. Within 7 ulp of
tanh (4e-7 absolute, the worst near |x| = 5.8; numpy's float32 tanh, the references', is within
1.4), 0.15 us for a 64-unit step's 320 gates where the float64 exp-polynomial form this
replaced (within 1 ulp) took 0.86 us of a 2.7 us step (libm's scalar tanh before it: ~20 ns a
gate). The gate arithmetic is float32 in the references' order. error_model="numpy" and no
fastmath: NaN passes through as in the references (inf saturates to +-1), and no FMA
contraction of the gate products.
"""
from __future__ import annotations

import numpy as np
from numba import njit

OPTS = dict(cache=True, nogil=True, error_model="numpy")


# tanh(x) ~ x P(x^2) / Q(x^2) on |x| <= CLAMP (Eigen's float tanh coefficients)
P = tuple(np.float32(v) for v in (4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05,
                                  5.12229709037114e-08, -8.60467152213735e-11, 2.00018790482477e-13,
                                  -2.76076847742355e-16))
Q = tuple(np.float32(v) for v in (4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04,
                                  1.19825839466702e-06))
CLAMP = np.float32(7.90531110763549805)   # tanh rounds to 1 in float32 from here
F_HALF, F_ONE = np.float32(0.5), np.float32(1.0)


@njit(**OPTS)
def _squash(v, at, m, half):
    """v[at:at + m] = tanh(v) in place, or (half) sigmoid(v) = 0.5 * tanh(v / 2) + 0.5."""
    p0, p1, p2, p3, p4, p5, p6 = P
    q0, q1, q2, q3 = Q
    scale = F_HALF if half else F_ONE
    for i in range(m):
        x = v[at + i] * scale
        if x < -CLAMP:
            x = -CLAMP
        if x > CLAMP:
            x = CLAMP
        x2 = x * x
        t = x * (p0 + x2 * (p1 + x2 * (p2 + x2 * (p3 + x2 * (p4 + x2 * (p5 + x2 * p6)))))) / (
            q0 + x2 * (q1 + x2 * (q2 + x2 * q3)))
        v[at + i] = F_HALF * t + F_HALF if half else t


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
            _squash(a, 0, 2 * n, True)
            _squash(a, 2 * n, n, False)
            for j in range(n):
                c[j] = a[n + j] * c[j] + a[j] * a[2 * n + j]
                a[j] = _bound((g[n + j] + acc[n + j]) + p[n + j] * c[j], clip)
                a[n + j] = c[j]
            _squash(a, 0, n, True)
            _squash(a, n, n, False)
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
    cols = 3 * n if linear_before_reset else 2 * n
    yh[:, :] = h0
    for s in range(seq):
        t = seq - 1 - s if reverse else s
        for b in range(batch):
            h, g = yh[b], xw[t, b]
            _times_rt(h, rt, 0, cols, acc)
            for j in range(2 * n):
                a[j] = _bound((g[j] + acc[j]) + rb[j], clip)
            _squash(a, 0, 2 * n, True)
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
            _squash(a, 2 * n, n, False)
            for j in range(n):
                h[j] = (np.float32(1) - a[j]) * a[2 * n + j] + a[j] * h[j]
            y[t, b] = h
