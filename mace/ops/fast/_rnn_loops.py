"""numba loops behind the fast LSTM and GRU (imported only through _jit.op_loops("_rnn_loops")).

The input projection of every time step is one GEMM before these loops (fast/lstm.py,
fast/gru.py); what is left is the recurrence, sequential in time: per step and batch row, the
state times R^T (a GEMV with the gates' columns in registers: _times_rt), then the gates
element-wise. The reference ran that as one small np.matmul and ~15 numpy calls per step
(oww_hey_mycroft: 96% of its run in 16 steps of a 64-unit LSTM).

Sigmoid and tanh run over a step's gate vector at once (_squash), in float32 arithmetic LLVM
vectorizes 16 lanes wide: exp(-|x|) by a Cody-Waite reduction, a degree-7 Taylor polynomial and
2**n made from its bits (within 1.2 ulp); sigmoid(x) = 1 / (1 + e) (e / (1 + e) for x < 0),
within 2.3 ulp; tanh(x) = (1 - e) / (1 + e) with e = exp(-2|x|), or its odd Taylor series below
|x| = 0.4 (1 - e cancels there), within 2.2 ulp (numpy's float32 tanh, the references', is
within 1.4; sigmoid keeps its last bits near 1, which a GRU's 1 - z reads). A 64-unit step's
320 gates cost ~0.3 us in the recurrence, against ~1.5 us for the float64 exp polynomial with a
scratch exponent array this replaced (libm's scalar tanh before that: ~20 ns a gate). The
gate arithmetic is float32 in the references' order. error_model="numpy" and no fastmath: NaN
passes through as in the references, inf saturates, and no FMA contraction of the gate
products. numba caches these loops under this file's stamp only: after editing _tile_ir.py or
_act_loops.py's _f32_from_bits, touch this file.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from mace.ops.fast._act_loops import _f32_from_bits
from mace.ops.fast._tile_ir import TileIR

OPTS = dict(cache=True, nogil=True, error_model="numpy")


F32 = np.float32
# exp(x) = 2**n p(r), x = n ln2 + r: ln2 split so that n * LN2_HI is exact in float32
LOG2E, LN2_HI, LN2_LO = F32(1.4426950408889634), F32(0.693359375), F32(-2.1219444005469057e-4)
EXP_POLY = tuple(F32(1.0 / c) for c in (5040, 720, 120, 24, 6, 2, 1, 1))   # Taylor, r**7 first
EXP_FLOOR = F32(-87.0)     # exp of less is below float32's normals (~1.6e-38)
# tanh's odd Taylor series to x**13 below SERIES_TOP (within 0.6 ulp), as coefficients of x**2k
TANH_SERIES = tuple(F32(c) for c in (-21844 / 6081075, 1382 / 155925, -62 / 2835, 17 / 315, -2 / 15, 1 / 3))
SERIES_TOP = F32(0.4)
F_HALF, F_ONE = F32(0.5), F32(1.0)


@njit(inline="always", **OPTS)
def _exp_neg(x):
    """exp(x) for x <= 0 (NaN passes) in float32: within 1.2 ulp; 0 below EXP_FLOOR (where it is
    a subnormal or 0 in float32), so that sigmoid(-inf) is 0 as the references give it."""
    tiny = x < EXP_FLOOR
    x = EXP_FLOOR if tiny else x
    n = np.floor(x * LOG2E + F_HALF)
    r = (x - n * LN2_HI) - n * LN2_LO
    c7, c6, c5, c4, c3, c2, c1, c0 = EXP_POLY
    p = ((((((c7 * r + c6) * r + c5) * r + c4) * r + c3) * r + c2) * r + c1) * r + c0
    return F32(0) if tiny else p * _f32_from_bits((np.int32(n) + np.int32(127)) << np.int32(23))


@njit(**OPTS)
def _squash(v, at, m, half):
    """v[at:at + m] = tanh(v) in place, or (half) sigmoid(v). Over a slice, indexed from 0: with
    v[at + i] (an index that may be negative to numba) LLVM kept the loops scalar."""
    w = v[at:at + m]
    if half:
        for i in range(w.shape[0]):   # 1 / (1 + e) or e / (1 + e), e = exp(-|x|) <= 1: no overflow
            x = w[i]
            e = _exp_neg(-abs(x))
            w[i] = (F_ONE if x >= 0 else e) / (F_ONE + e)
        return
    s5, s4, s3, s2, s1, s0 = TANH_SERIES
    for i in range(w.shape[0]):
        x = w[i]
        y = abs(x)
        y2 = y * y
        near = y - y * y2 * (((((s5 * y2 + s4) * y2 + s3) * y2 + s2) * y2 + s1) * y2 + s0)
        e = _exp_neg(F32(-2) * y)
        far = (F_ONE - e) / (F_ONE + e)
        t = np.copysign(near if y < SERIES_TOP else far, x)   # -0.0 stays -0.0
        w[i] = x if x != x else t


@njit(inline="always", **OPTS)
def _bound(x, clip):
    """x clamped to [-clip, clip] (clip 0: as it is); a NaN stays NaN."""
    if clip > 0:
        if x < -clip:
            return -clip
        if x > clip:
            return clip
    return x


class _GemvIR(TileIR):
    """acc[0:16 vecs] = h @ r[:, 0:16 vecs] as `vecs` <16 x float> fma chains over k, held in
    registers through the k loop (r's rows ldr floats apart), stored once at the end."""

    def __init__(self, builder, vecs: int):
        from numba.core import cgutils

        f32 = ir.FloatType()
        vec = ir.VectorType(f32, 16)
        self.fptr = f32.as_pointer()
        self.fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3),
                                                  "llvm.fma.v16f32")
        super().__init__(builder, 1, vecs, vec)

    def emit(self, h_, n_, r_, ldr_, out_):
        b, const = self.b, self.const
        h, r, out = (b.inttoptr(v, self.fptr) for v in (h_, r_, out_))
        body, after = b.append_basic_block("k_loop"), b.append_basic_block("k_done")

        def step(acc, k):
            row = b.gep(r, [b.mul(k, ldr_)])
            hk = self.splat(b.load(b.gep(h, [k]), align=4))
            return [[b.call(self.fma, [hk, b.load(self.vptr(row, const(16 * v)), align=4), acc[0][v]])
                     for v in range(self.vecs)]]
        zero = ir.Constant(self.vec, None)
        acc = self.counted_loop(body, after, const(0), n_, 1, [[zero] * self.vecs], step)
        for v in range(self.vecs):
            b.store(acc[0][v], self.vptr(out, const(16 * v)), align=4)


@intrinsic(prefer_literal=True)
def _gemv(typingctx, nv, h, n, r, ldr, out):
    """out[:16 nv] = h[:n] @ r[:n, :16 nv] (addresses as integers, ldr in floats); nv a literal."""
    if not isinstance(nv, types.IntegerLiteral):
        return None
    vecs = nv.literal_value
    i64 = types.int64
    sig = types.void(nv, i64, i64, i64, i64, i64)

    def codegen(context, builder, signature, args):
        _GemvIR(builder, vecs).emit(*args[1:])
        return context.get_dummy_value()
    return sig, codegen


@njit(inline="always", **OPTS)
def _times_rt(h, rt, col0, cols, acc):
    """acc[col0:col0 + cols] = h @ rt[:, col0:col0 + cols] (rt C-contiguous), summed from zero in
    row order with fused multiply-adds: 128 columns at a time in registers (8 fma chains, enough
    to fill both FMA ports), then 16 at a time, then one by one. An L1-resident R^T (32 units:
    16 KB) 0.22 -> 0.11 us a product in a chain of dependent ones, against numba's own loop (acc
    loaded and stored per row); at 64 units (64 KB) both read R^T from L2 at its bandwidth
    (~0.8 us)."""
    n, ldr = h.shape[0], rt.shape[1]
    hp, rp, ap = h.ctypes.data, rt.ctypes.data, acc.ctypes.data
    j, end = col0, col0 + cols
    # the registers' loop reads by address: strided views take the loop below for every column
    dense = h.strides[0] == 4 and acc.strides[0] == 4 and rt.strides[1] == 4 and rt.strides[0] == 4 * ldr
    stop = end if dense else col0
    while j + 128 <= stop:
        _gemv(8, hp, n, rp + 4 * j, ldr, ap + 4 * j)
        j += 128
    while j + 16 <= stop:
        _gemv(1, hp, n, rp + 4 * j, ldr, ap + 4 * j)
        j += 16
    for jj in range(j, end):
        s = np.float32(0)
        for k in range(n):
            s += h[k] * rt[k, jj]
        acc[jj] = s


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
