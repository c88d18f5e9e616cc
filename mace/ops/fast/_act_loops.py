"""numba loops behind the fast float activations and unary Eltwise (imported only through
mace.ops.fast._jit.act_loops()).

Why a file of their own: numba keys its cache on a function's file, so an edit here recompiles
these loops only, not the GEMMs and convs of _loops.py (which keeps the same one-file rule:
each `*_par` driver sits beside its serial loop).

Vectorized without a vector math library: numba here has no SVML, so a loop that calls libm's
expf / tanhf / erf runs one scalar call per element (~5-20 ns). The transcendental functions are
written out instead as plain float64 arithmetic (a range reduction, a polynomial, 2**n built
from its bits) that LLVM vectorizes like any other loop body: 4 or 8 lanes of float64,
converted from and back to float32 once. In float64 the polynomials carry ~1e-11 relative error,
so each float32 result is the correctly rounded value of the function nearly always; the
numpy references (float32 numpy, or float64 scipy/numpy rounded once) are within 1-2 ulp of
the same, which is the tolerance the tests hold (tests/ops/test_fast_activations.py).
SIGMOID and SiLU (SWISH with alpha 1: YOLO's conv activation, 13% of a YOLOv8n run) are the
exception: float32 arithmetic, 16 lanes, with the roundings that matter taken back exactly by
fma (`_sigmoid32`, within 1.75 ulp of the true value over every float32 in |x| < 128, a
million-value sweep elsewhere): 0.92 -> 0.64 ns an element.

Options: error_model="numpy" (the python model's ZeroDivisionError check on 1/x is a branch
that stops the vectorizer) and no fastmath: nnan/ninf would let LLVM drop the NaN and inf
cases the references keep, contract would fuse HARDSWISH's and HARDSIGMOID's float32 multiply
and add into an FMA that rounds once where numpy rounds twice, arcp would turn divisions
into reciprocal products. The piecewise-linear activations (PRELU, LEAKYRELU, HARDSWISH,
HARDSIGMOID, SQRT, RSQRT, RECIPROCAL, ...) run the references' float32 operations in the
same order, so they give the same bytes.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, prange, types
from numba.extending import intrinsic

OPTS = dict(cache=True, nogil=True, error_model="numpy")
PAR = dict(OPTS, parallel=True)
# the float64 helpers: inlined into the loop (a call in the body stops the vectorizer), and
# contract (FMA) allowed, as their float64 rounding is ~1e-16 against the float32 result's 6e-8
MATH = dict(OPTS, inline="always", fastmath={"contract"})

# the activation / unary codes of `unary` (mace/ops/fast/activation.py, eltwise.py name them)
# (no TANH, EXP, LOG: numpy's own float32 np.tanh / np.exp / np.log are one vectorized pass
# already, and measured faster than these float64 loops: 1.2 / 1.8 / 1.6 ns an element against
# 2.4 / 1.8 / 2.2 on 64k floats, 1 thread, a loaded machine; the references keep them)
SIGMOID, SWISH, GELU, GELU_TANH, ERF, ELU, SELU, SOFTPLUS, MISH = range(9)
HARDSWISH, HARDSIGMOID, LEAKYRELU, SQRT, RSQRT, RECIPROCAL, NEG, ABS, SQUARE = range(9, 18)
# the codes only `store_rows` (a conv's or FC's fused activation) runs: a standalone TANH stays np.tanh,
# PRELU has its own loop
TANH, PRELU = 18, 19

F0, F1, F6, FHALF = np.float32(0), np.float32(1), np.float32(6), np.float32(0.5)
# _sigmoid32's exp: x = n ln2 + r, ln2 split so that n * LN2_HI32 is exact (as _rnn_loops')
LOG2E32, MAGIC32 = np.float32(1.4426950408889634), np.float32(12582912.0)   # 1.5 * 2**23
LN2_HI32, LN2_LO32 = np.float32(0.693359375), np.float32(-2.1219444005469057e-4)
EXP_POLY32 = tuple(np.float32(1.0 / c) for c in (5040, 720, 120, 24, 6, 2, 1, 1))   # Taylor, r**7 first
F32_FLOOR = np.float32(-120.0)   # below it exp(x) and x exp(x) round to 0, even as subnormals
TWO_M50 = np.float32(2.0 ** -50)
LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 0.6931471803691238, 1.9082149292705877e-10   # ln 2 split: n * LN2_HI is exact
MAGIC = 6755399441055744.0   # 1.5 * 2**52: adding it rounds a float64 to an integer in its low bits
SQRT_HALF = 0.7071067811865476
SQRT_2_PI = 0.7978845608028654   # sqrt(2 / pi)
TWO_SQRT_PI = 1.1283791670955126   # 2 / sqrt(pi)
# log(erfcx(z) / t), t = 2 / (2 + z), as a polynomial in u = 2t - 1 (highest power first):
# Chebyshev fit of degree 16 on z in [0, inf) (as Numerical Recipes' erfccheb), |error| < 1e-11
ERFC_POLY = (3.160961759674522e-06, -3.7251295998975e-06, -2.0765126832221045e-05,
             3.469231190606865e-05, 6.234222808558595e-05, -0.00017558765969122433,
             -8.858270417289102e-05, 0.000673960281083762, -0.00014798485505130584,
             -0.0023458258127696035, 0.0017592649632287433, 0.008824933276783645,
             -0.00987272115860544, -0.046895609485038715, 0.04734330801970467,
             0.6726432239564759, -0.6717940840638907)


@intrinsic
def _bits(typingctx, x):
    """The int64 holding a float64's bits."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx, i):
    """The float64 whose bits an int64 holds."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


@intrinsic
def _f32_from_bits(typingctx, i):
    """The float32 whose bits an int32 holds (_rnn_loops, _quantize_loops use it too)."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))
    return types.float32(types.int32), codegen


@njit(inline="always", **OPTS)
def ordered_key(bits):
    """A float32's bits (int32) as an int32 that orders as the floats do (negative floats'
    magnitude bits flipped: -x below -y where x > y; -0.0 is -1, just below +0.0's 0; NaNs
    beyond the infinities). Its own inverse. Integer min / max vectorize without fast-math;
    float ones under NaN rules do not (_quantize_loops' range, softmax_rows' max)."""
    return bits ^ ((bits >> 31) & np.int32(0x7fffffff))


@njit(**MATH)
def _exp(x):
    """exp(x) in float64, relative error < 2e-10 (|r|**9 / 9!: far less near 0, as expm1 needs):
    x = n ln2 + r, |r| <= ln2 / 2, a degree-8 Taylor polynomial of r (degree 11 was ~10% slower
    and no more accurate once rounded to float32), times 2**n made from its bits. |x| is held to 700 (exp of that
    is far outside float32 either way), below -700 it is 0; NaN passes through the comparisons."""
    tiny = x < -700.0
    x = 700.0 if x > 700.0 else x
    x = -700.0 if tiny else x
    t = x * LOG2E + MAGIC          # the nearest integer n sits in t's low bits
    n = t - MAGIC
    r = (x - n * LN2_HI) - n * LN2_LO
    p = 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    scale = _from_bits(((_bits(t) - _bits(MAGIC)) + 1023) << 52)
    return 0.0 if tiny else p * scale   # exp(-inf) = 0 exactly: -inf * sigmoid(-inf) is NaN, as numpy's


@njit(**MATH)
def _expm1(x):
    """exp(x) - 1 without the cancellation near 0 (ELU, SELU): a Taylor cubic below 1e-5."""
    small = x * (1.0 + x * (0.5 + x * (1.0 / 6.0)))
    return small if abs(x) < 1e-5 else _exp(x) - 1.0


@njit(**MATH)
def _log(x):
    """log(x) in float64 for x > 0 (finite, normal: a float32 widened): x = m 2**k with m in
    [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, series to
    s**17 (relative error < 1e-13). Zero, negatives, inf and NaN are the caller's."""
    b = _bits(x)
    k = ((b >> 52) & 0x7FF) - 1023
    m = _from_bits((b & 0xFFFFFFFFFFFFF) | (1023 << 52))
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    kf = float(k + 1) if big else float(k)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    p = 1.0 / 17.0
    p = p * s2 + 1.0 / 15.0
    p = p * s2 + 1.0 / 13.0
    p = p * s2 + 1.0 / 11.0
    p = p * s2 + 1.0 / 9.0
    p = p * s2 + 1.0 / 7.0
    p = p * s2 + 1.0 / 5.0
    p = p * s2 + 1.0 / 3.0
    p = p * s2 + 1.0
    return kf * LN2_HI + (kf * LN2_LO + 2.0 * s * p)


@njit(**MATH)
def _sigmoid(x):
    """1 / (1 + exp(-x)) in float64, exp only of -|x| (never overflows)."""
    e = _exp(-abs(x))
    return (1.0 if x >= 0 else e) / (1.0 + e)


@intrinsic
def _fma32(typingctx, a, b, c):
    """a * b + c rounded once (float32): the exact error terms of _sigmoid32."""
    def codegen(context, builder, sig, args):
        from numba.core import cgutils
        f32 = context.get_value_type(types.float32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32] * 3), "llvm.fma.f32")
        return builder.call(fn, args)
    return types.float32(types.float32, types.float32, types.float32), codegen


@njit(inline="always", **OPTS)
def _sigmoid32(x, swish):
    """sigmoid(x), or (swish) x sigmoid(x), of a float32 in float32 arithmetic (16 lanes a vector,
    against the float64 path's 8 and its float64 division: SiLU 0.92 -> ~0.3 ns an element),
    within 2 ulp of the true value: e = exp(-|x|) to ~0.8 ulp (Cody-Waite, degree-7 Taylor,
    2**n from its bits), then q = num / (1 + e) with 1 + e's rounding error and the division's
    (and x e's for a swish) taken back exactly by fma, so that one rounding is left. For x < 0
    the numerator e (x e) is carried 2**50 larger and scaled down last: below -87 e is
    subnormal, and the result rounds there once, as the true value would."""
    y = -abs(x)
    tiny = y < F32_FLOOR
    y = F32_FLOOR if tiny else y
    t = y * LOG2E32 + MAGIC32           # round(y log2 e) in t's low bits
    n = t - MAGIC32
    r = (y - n * LN2_HI32) - n * LN2_LO32
    c7, c6, c5, c4, c3, c2, _, _ = EXP_POLY32
    h = ((((c7 * r + c6) * r + c5) * r + c4) * r + c3) * r + c2
    p = _fma32(r * r, h, r) + F1        # 1 + (r + r**2 h): one rounding of weight 1 left
    es = p * _f32_from_bits((np.int32(n) + np.int32(127 + 50)) << np.int32(23))   # e 2**50
    es = F0 if tiny else es
    e = es * TWO_M50
    d = F1 + e
    de = (F1 - d) + e                   # 1 + e = d + de exactly (e <= 1)
    neg = x < F0
    num = es if neg else F1
    lo = F0
    if swish:
        xs = x * num
        lo = _fma32(x, num, -xs)        # x num = xs + lo exactly
        num = xs
    inv = F1 / d
    q = num * inv
    rem = (_fma32(-q, d, num) + lo) - q * de   # num + lo - q (d + de), to first order exact
    q = _fma32(rem, inv, q)
    q = q * TWO_M50 if neg else q
    if swish and (x == np.inf or x == -np.inf):
        q = x if x > F0 else np.float32(np.nan)   # x * sigmoid(x): inf; -inf * 0: NaN, as numpy's
    if swish and x == F0:
        q = x * FHALF                   # -0.0 stays -0.0 (the corrections' sum gives +0.0)
    return x if x != x else q


@njit(**MATH)
def _erfc(z):
    """erfc(z) for z >= 0 in float64, relative error < 1e-11: t exp(-z**2 + P(2t - 1)),
    t = 2 / (2 + z) (P: ERFC_POLY; a large z underflows to 0 as it should)."""
    t = 2.0 / (2.0 + z)
    u = 2.0 * t - 1.0
    (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16) = ERFC_POLY
    p = ((((((((c0 * u + c1) * u + c2) * u + c3) * u + c4) * u + c5) * u + c6) * u + c7) * u + c8)
    p = (((((((p * u + c9) * u + c10) * u + c11) * u + c12) * u + c13) * u + c14) * u + c15) * u + c16
    return t * _exp(p - z * z)


@njit(**MATH)
def _erf(x):
    """erf(x) in float64: the Maclaurin series to x**15 for |x| < 0.5 (relative error < 1e-12),
    1 - erfc(|x|) signed above it (erfc(0.5) = 0.48: no cancellation)."""
    a = abs(x)
    x2 = a * a
    s = -1.0 / 75600.0
    s = s * x2 + 1.0 / 9360.0
    s = s * x2 - 1.0 / 1320.0
    s = s * x2 + 1.0 / 216.0
    s = s * x2 - 1.0 / 42.0
    s = s * x2 + 1.0 / 10.0
    s = s * x2 - 1.0 / 3.0
    s = s * x2 + 1.0
    big = 1.0 - _erfc(a)   # both computed: a select, not a branch, keeps the loop vectorized
    v = TWO_SQRT_PI * a * s
    v = v if a < 0.5 else big
    return math.copysign(v, x)


@njit(**MATH)
def _gelu(x):
    """x Phi(x) = x erfc(-x / sqrt 2) / 2 in float64: erfc of |x| / sqrt 2, mirrored for x > 0,
    so the negative tail keeps its relative accuracy (1 + erf cancels there)."""
    c = _erfc(abs(x) * SQRT_HALF)
    return 0.5 * x * (2.0 - c if x >= 0 else c)


@njit(**MATH)
def _softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) in float64 (never overflows)."""
    e = _exp(-abs(x))
    small = e * (1.0 - e * (0.5 - e * (1.0 / 3.0)))   # log1p(e) where 1 + e would round e away
    big = _log(1.0 + e)
    v = max(x, 0.0) + (small if e < 1e-5 else big)
    return v if x == x else x   # NaN: _log reads no NaN from its bits


@njit(**MATH)
def _tanh(x):
    """tanh(x) = -m / (2 + m), m = expm1(-2|x|), signed: no cancellation near 0, 1 for a large |x|."""
    m = _expm1(-2.0 * abs(x))
    return math.copysign(-m / (2.0 + m), x)


@njit(**MATH)
def _mish(x):
    """x tanh(softplus(x)) = x n / (n + 2), n = e (e + 2), e = exp(x); x itself above 30."""
    e = _exp(x)
    n = e * (e + 2.0)
    return x if x > 30.0 else x * (n / (n + 2.0))


# In place (x is out) each loop below runs as its `*_inplace` twin, one array passed: with two,
# LLVM guards the vector loop with an overlap check, which x == out fails, and runs the scalar
# loop instead (a conv's fused HARDSWISH, in place: 5.6 ns an element against 0.6).
UNARY = dict(OPTS, fastmath={"contract"})
BODY = dict(OPTS, inline="always")


@njit(**UNARY)
def unary(x, code, a, b, out, r0, r1):
    """out = f[code](x) over flat float32 arrays, elements r0:r1, for the codes before HARDSWISH
    (`exact` runs the others). a, b: float32 parameters
    (SWISH: alpha; ELU: alpha; SELU: alpha, gamma; LEAKYRELU: slope; HARDSIGMOID: slope, offset)."""
    # sliced first: indices from range(n) are provably >= 0, so numba drops its
    # wraparound checks and the loops vectorize (as _loops.binary_clip)
    x, out = x[r0:r1], out[r0:r1]
    _unary_body(x, code, a, b, out, out.shape[0])


@njit(**UNARY)
def unary_inplace(x, code, a, b, r0, r1):
    x = x[r0:r1]
    _unary_body(x, code, a, b, x, x.shape[0])


@njit(**BODY)
def _unary_body(x, code, a, b, out, n):
    if code == SIGMOID:
        for i in range(n):
            out[i] = _sigmoid32(x[i], False)
    elif code == SWISH and a == F1:   # SiLU: in float32 (a * x rounded first would move it)
        for i in range(n):
            out[i] = _sigmoid32(x[i], True)
    elif code == SWISH:
        for i in range(n):
            v = np.float64(x[i])
            out[i] = v * _sigmoid(a * v)
    elif code == GELU:
        for i in range(n):
            out[i] = _gelu(np.float64(x[i]))
    elif code == GELU_TANH:   # 0.5 x (1 + tanh(y)) = x sigmoid(2y): no cancellation for y << 0
        for i in range(n):
            v = np.float64(x[i])
            out[i] = v * _sigmoid(2.0 * SQRT_2_PI * (v + 0.044715 * v * v * v))
    elif code == ERF:
        for i in range(n):
            out[i] = _erf(np.float64(x[i]))
    elif code == ELU:   # x > 0 keeps x exactly, as the reference's np.where
        for i in range(n):
            v = x[i]
            out[i] = v if v > 0 else a * _expm1(np.float64(v))
    elif code == SELU:   # gamma * x for x > 0 in float32, as the reference rounds it
        for i in range(n):
            v = x[i]
            out[i] = b * v if v > 0 else b * (a * _expm1(np.float64(v)))
    elif code == SOFTPLUS:
        for i in range(n):
            out[i] = _softplus(np.float64(x[i]))
    else:   # MISH
        for i in range(n):
            out[i] = _mish(np.float64(x[i]))


# Apart from `unary`: numba compiles a callee with its caller's fastmath flags when the callee
# sets none, and unary's contract would fuse HARDSIGMOID's x * slope + offset into an FMA.
EXACT = dict(OPTS, fastmath=False)


@njit(**EXACT)
def exact(x, code, a, b, out, r0, r1):
    """The kinds the references compute in float32 steps (code HARDSWISH and after): the same
    steps in the same order, so the same bytes; as `unary` otherwise."""
    x, out = x[r0:r1], out[r0:r1]
    _exact_body(x, code, a, b, out, out.shape[0])


@njit(**EXACT)
def exact_inplace(x, code, a, b, r0, r1):
    x = x[r0:r1]
    _exact_body(x, code, a, b, x, x.shape[0])


@njit(**dict(BODY, fastmath=False))
def _exact_body(x, code, a, b, out, n):
    if code == HARDSWISH:   # x * clip(x / 6 + 0.5, 0, 1)
        for i in range(n):
            v = x[i]
            g = v / F6 + FHALF
            g = F0 if g < F0 else (F1 if g > F1 else g)
            out[i] = v * g
    elif code == HARDSIGMOID:   # clip(x * slope + offset, 0, 1)
        for i in range(n):
            g = x[i] * a + b
            out[i] = F0 if g < F0 else (F1 if g > F1 else g)
    elif code == LEAKYRELU:   # = max(x, x * slope) for a slope in [0, 1], NaN kept
        for i in range(n):
            v = x[i]
            out[i] = v if v >= F0 else v * a
    elif code == SQRT:
        for i in range(n):
            out[i] = np.sqrt(x[i])
    elif code == RSQRT:
        for i in range(n):
            out[i] = F1 / np.sqrt(x[i])
    elif code == RECIPROCAL:
        for i in range(n):
            out[i] = F1 / x[i]
    elif code == NEG:
        for i in range(n):
            out[i] = -x[i]
    elif code == ABS:
        for i in range(n):
            out[i] = abs(x[i])
    else:   # SQUARE
        for i in range(n):
            out[i] = x[i] * x[i]


@njit(**OPTS)
def prelu(x, slope, out, r0, r1):
    """out = x >= 0 ? x : x * slope[c] over rows r0:r1 of x (rows, C), the slope per channel
    (last axis, NHWC)."""
    _prelu_body(x, slope, out, r0, r1)


@njit(**OPTS)
def prelu_inplace(x, slope, r0, r1):
    _prelu_body(x, slope, x, r0, r1)


@njit(**BODY)
def _prelu_body(x, slope, out, r0, r1):
    c = x.shape[1]
    for r in range(r0, r1):
        xr, orow = x[r], out[r]
        for ch in range(c):
            v = xr[ch]
            orow[ch] = v if v >= F0 else v * slope[ch]


@njit(**OPTS)
def _part(rows, parts, p):
    step = (rows + parts - 1) // parts
    return min(rows, p * step), min(rows, (p + 1) * step)


@njit(**dict(PAR, fastmath={"contract"}))
def unary_par(x, code, a, b, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        unary(x, code, a, b, out, r0, r1)


@njit(**dict(PAR, fastmath=False))
def exact_par(x, code, a, b, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        exact(x, code, a, b, out, r0, r1)


@njit(**PAR)
def prelu_par(x, slope, out, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        prelu(x, slope, out, r0, r1)


@njit(**dict(PAR, fastmath={"contract"}))
def unary_inplace_par(x, code, a, b, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        unary_inplace(x, code, a, b, r0, r1)


@njit(**dict(PAR, fastmath=False))
def exact_inplace_par(x, code, a, b, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        exact_inplace(x, code, a, b, r0, r1)


@njit(**PAR)
def prelu_inplace_par(x, slope, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        prelu_inplace(x, slope, r0, r1)


# ---- Eltwise of a tensor and a constant (one number, or one per last-axis channel) ----------
# Paddle2ONNX writes hardswish as x * clip(x + 3, 0, 6) / 6 and a per-channel affine after it:
# each an Eltwise against a constant, which the reference runs as a numpy call (plus np.clip for
# a fused clip). One float32 operation per element, as numpy's, then the clip: the same bytes.
CONST_SUM, CONST_SUB, CONST_RSUB, CONST_PROD, CONST_DIV, CONST_RDIV, CONST_MIN, CONST_MAX = range(8)


@njit(**EXACT)
def const_binary(x, c, code, lo, hi, out, r0, r1):
    """out[r, k] = clip(x[r, k] (op) c[k], lo, hi) over rows r0:r1 of x (rows, C); RSUB and
    RDIV take the constant first (c - x, c / x)."""
    _const_body(x, c, code, lo, hi, out, r0, r1)


@njit(**EXACT)
def const_binary_inplace(x, c, code, lo, hi, r0, r1):
    _const_body(x, c, code, lo, hi, x, r0, r1)


@njit(**dict(BODY, fastmath=False))
def _clip(v, lo, hi):
    v = lo if v < lo else v   # NaN passes both, as np.clip's
    return hi if v > hi else v


@njit(**dict(BODY, fastmath=False))
def _const_body(x, c, code, lo, hi, out, r0, r1):
    # the code's branch outside the rows: one plain loop per case vectorizes (a branch chain
    # per element ran slower than numpy's two passes)
    k = x.shape[1]
    for r in range(r0, r1):
        xr, o = x[r], out[r]
        if code == CONST_SUM:
            for j in range(k):
                o[j] = _clip(xr[j] + c[j], lo, hi)
        elif code == CONST_SUB:
            for j in range(k):
                o[j] = _clip(xr[j] - c[j], lo, hi)
        elif code == CONST_RSUB:
            for j in range(k):
                o[j] = _clip(c[j] - xr[j], lo, hi)
        elif code == CONST_PROD:
            for j in range(k):
                o[j] = _clip(xr[j] * c[j], lo, hi)
        elif code == CONST_DIV:
            for j in range(k):
                o[j] = _clip(xr[j] / c[j], lo, hi)
        elif code == CONST_RDIV:
            for j in range(k):
                o[j] = _clip(c[j] / xr[j], lo, hi)
        elif code == CONST_MIN:   # a NaN x stays NaN (np.minimum); NaN constants are declined
            for j in range(k):
                v, w = xr[j], c[j]
                o[j] = _clip(w if w < v else v, lo, hi)
        else:
            for j in range(k):
                v, w = xr[j], c[j]
                o[j] = _clip(w if w > v else v, lo, hi)


@njit(**dict(PAR, fastmath=False))
def const_binary_par(x, c, code, lo, hi, out, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        const_binary(x, c, code, lo, hi, out, r0, r1)


@njit(**dict(PAR, fastmath=False))
def const_binary_inplace_par(x, c, code, lo, hi, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        const_binary_inplace(x, c, code, lo, hi, r0, r1)


# ---- a conv's or FC's fused activation, in the packed GEMM's (or depthwise loop's) store step ----
# _loops.py calls `store_rows` by address after each block it stores (its row block x its panels:
# at most 192 rows, still in cache), so any activation keeps the conv on the packed GEMM and its
# output may be a Concat's channel slice (rows `ld` floats apart). By address, so that neither
# file's numba cache holds a stale copy of the other's code (numba keys a function's cache on its
# own file only).
STORE_ROWS = types.void(types.CPointer(types.float32), types.int64, types.int64, types.int64, types.int64,
                        types.float32, types.float32, types.CPointer(types.float32))


@njit(**UNARY)
def _tanh_inplace(x):
    for i in range(x.shape[0]):
        x[i] = _tanh(np.float64(x[i]))


@njit(**OPTS)
def _prelu_row(x, slope):
    for i in range(x.shape[0]):
        v = x[i]
        x[i] = v if v >= F0 else v * slope[i]


@cfunc(STORE_ROWS, cache=True, error_model="numpy")
def store_rows(at, rows, cols, ld, code, a, b, slope):
    """In place over `rows` rows of `cols` floats from address `at`, `ld` floats apart: activation
    `code` with parameters a, b as `unary` / `exact` (TANH: _tanh; PRELU: slope[j] for column j)."""
    if rows <= 0 or cols <= 0:
        return
    if ld == cols and code != PRELU:   # contiguous rows: one run
        cols, rows = rows * cols, 1
    flat = carray(at, (rows - 1) * ld + cols)
    slopes = carray(slope, cols if code == PRELU else 0)
    for r in range(rows):
        row = flat[r * ld:r * ld + cols]
        if code < HARDSWISH:
            unary_inplace(row, code, a, b, 0, cols)
        elif code == TANH:
            _tanh_inplace(row)
        elif code == PRELU:
            _prelu_row(row, slopes)
        else:
            exact_inplace(row, code, a, b, 0, cols)


# ---- LayerNorm over the last axis -------------------------------------------------------------
# Sums in float64 (reassociated: LLVM vectorizes a reduction only so), each output rounded once
# from float64; the reference's float32 steps (numpy's pairwise mean, then four roundings) are
# within a few float32 ulp of the same.
NORM = dict(OPTS, fastmath={"reassoc", "contract"})


@njit(**NORM)
def layer_norm(x, skip, has_skip, scale, bias, eps, lo, hi, out, r0, r1):
    """out[r] = (v - mean(v)) / sqrt(var(v) + eps) * scale + bias over rows r0:r1 of x (rows, C),
    v = x[r] (+ skip[r] in float32 first, as an Add before it would round, when has_skip), then
    clipped to [lo, hi] (a fused RELU / RELUX / CLIP; -inf, inf: none) as np.clip does: NaN
    through, -0.0 kept, on the float32 value (the same, as rounding to float32 is monotone)."""
    c = x.shape[1]
    for r in range(r0, r1):
        xr, o = x[r], out[r]
        if has_skip:   # o holds the float32 sum (out may be x or skip itself: each read first)
            sr = skip[r]
            for j in range(c):
                o[j] = xr[j] + sr[j]
            mean, inv = _moments(o, eps)
            _norm_store_inplace(o, mean, inv, scale, bias, lo, hi)
        else:
            mean, inv = _moments(xr, eps)
            _norm_store(xr, mean, inv, scale, bias, lo, hi, o)


@njit(**NORM)
def _moments(v, eps):
    """(mean, 1 / sqrt(variance + eps)) of a row in float64, two passes."""
    c = v.shape[0]
    s = 0.0
    for j in range(c):
        s += np.float64(v[j])
    mean = s / c
    q = 0.0
    for j in range(c):
        d = np.float64(v[j]) - mean
        q += d * d
    return mean, 1.0 / math.sqrt(q / c + eps)


# The store apart, without reassoc: with it LLVM folds (v - mean) * (1 / sqrt(.)) into a
# division per element (16 x 384: 7.2 -> 4.7 us). Not inlined by numba (which would compile it
# with the caller's flags); an in-place twin, as `unary`'s: reading and writing one row through
# two names fails LLVM's overlap check and runs the scalar loop (with skip: 14 -> 5 us).
NORM_STORE = dict(OPTS, fastmath={"contract"})


@njit(**NORM_STORE)
def _norm_store(v, mean, inv, scale, bias, lo, hi, o):
    for j in range(o.shape[0]):
        t = np.float32((np.float64(v[j]) - mean) * inv * scale[j] + bias[j])
        t = lo if t < lo else t
        o[j] = hi if t > hi else t


@njit(**NORM_STORE)
def _norm_store_inplace(o, mean, inv, scale, bias, lo, hi):
    for j in range(o.shape[0]):
        t = np.float32((np.float64(o[j]) - mean) * inv * scale[j] + bias[j])
        t = lo if t < lo else t
        o[j] = hi if t > hi else t


@njit(**dict(NORM, parallel=True))
def layer_norm_par(x, skip, has_skip, scale, bias, eps, lo, hi, out, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        layer_norm(x, skip, has_skip, scale, bias, eps, lo, hi, out, r0, r1)


# ---- Softmax over the last axis ----------------------------------------------------------------
# -inf comes on purpose (attention masks): no nnan / ninf (LLVM would assume finite values), and
# the numpy error model (python's raises on 1 / 0 for a fully masked row). IEEE semantics give
# what onnxruntime gives: NaN for an all -inf row, 0 for masked entries. The exponentials are
# _exp's float64 polynomial rounded once, vectorized (numba's np.exp is one scalar libm call an
# element: attention's 12 x 16 x 16 took 17 us); the sum in float64 is the one loop with
# reassoc, which LLVM needs to vectorize a reduction and which regroups nothing else.
SUM = dict(OPTS, fastmath={"reassoc"})


@njit(**OPTS)
def softmax_rows(x, log, out):
    """Softmax (or log-softmax) of each row of x (rows, k) into out (not x itself), max-shifted;
    a row with inf or NaN gives NaN as the numpy reference does."""
    rows, k = x.shape
    for r in range(rows):
        xr, o = x[r], out[r]
        m = _row_max(xr)
        for i in range(k):
            o[i] = _exp(np.float64(xr[i] - m))
        total = _sum64(o)
        if log:  # (x - m) - log(total): m + log(total) would round away for huge |m|
            lse = np.log(total)
            for i in range(k):
                o[i] = (xr[i] - m) - lse
        else:
            inv = 1.0 / total
            for i in range(k):
                o[i] = o[i] * inv


@njit(**OPTS)
def _row_max(v):
    """max(v) through ordered_key (integer max vectorizes, a float one under NaN rules does not:
    a 4 x 1000 log-softmax 10.8 -> 6.0 us). A NaN may be the max or not: exp(NaN - m) makes the
    row NaN either way, as the reference's."""
    bits = v.view(np.int32)
    k = ordered_key(bits[0])
    for i in range(1, bits.shape[0]):
        k = max(k, ordered_key(bits[i]))
    return _f32_from_bits(ordered_key(k))


@njit(**SUM)
def _sum64(v):
    total = 0.0
    for i in range(v.shape[0]):
        total += np.float64(v[i])
    return total
