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

With 16 channels or more (float32 rows), `depthwise_taps` keeps each output row's channels in
<16 x float> registers over the taps (`_taps`, on _tile_ir.py's loop nest): LLVM's vector loop
takes 64 floats a trip, so 30 or 60 channels ran its scalar remainder (60 channels x 21 taps:
~200 ns; here ~40). The last vector ends at the row's end, overlapping the one before it where
the channels are not a multiple of 16: those lanes are computed twice, to the same bytes. The
same multiply then add per tap, in tap order: the bytes stay the reference's.

Global pooling is the same line reduced without weights (`global_pool`: a map's pixels are the
line, each row of C channels added, or maxed, into registers): numpy's mean over axes (1, 2) of
an NHWC map walked 16 channels a pixel, ~1.3 ns an element (selfie segmentation's 128 x 128 x 16
squeeze: 346 us of its 3.5 ms). The sum from 0 in pixel order, then divided by the count: the
reference's bytes; the max keeps a NaN as np.maximum does.

numba caches these loops under this file's stamp only: after editing _tile_ir.py, touch this file.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from mace.ops.fast._tile_ir import TileIR

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


class _TapsIR(TileIR):
    """One output row's channels (`vecs` vectors; the last at float `tail`, the others 16 apart)
    = clip(bias + sum over k taps of x_tap * w_tap): x's taps xs floats apart, w's ws."""

    def __init__(self, builder, vecs: int):
        super().__init__(builder, 1, vecs, ir.VectorType(ir.FloatType(), 16))
        self.fptr = ir.FloatType().as_pointer()

    def emit(self, x_, xs_, w_, ws_, k_, bias_, out_, tail_, lo_, hi_):
        b, const = self.b, self.const
        x, w, bias, out = (b.inttoptr(v, self.fptr) for v in (x_, w_, bias_, out_))
        offs = [const(16 * v) for v in range(self.vecs - 1)] + [tail_]

        def load(base, off):
            return b.load(self.vptr(base, off), align=4)

        def step(acc, i):   # multiply, then add: no fused multiply-add, the reference's roundings
            xr, wr = b.gep(x, [b.mul(i, xs_)]), b.gep(w, [b.mul(i, ws_)])
            return [[b.fadd(a, b.fmul(load(xr, off), load(wr, off))) for a, off in zip(acc[0], offs)]]

        acc = self.counted_loop(b.append_basic_block("taps"), b.append_basic_block("taps_done"),
                                const(0), k_, 1, [[load(bias, off) for off in offs]], step)
        lo, hi = self.splat(lo_), self.splat(hi_)
        for a, off in zip(acc[0], offs):   # selects: a NaN passes both, as np.clip's
            a = b.select(b.fcmp_ordered("<", a, lo), lo, a)
            b.store(b.select(b.fcmp_ordered(">", a, hi), hi, a), self.vptr(out, off), align=4)


@intrinsic(prefer_literal=True)
def _taps(typingctx, nv, x, xs, w, ws, k, bias, out, tail, lo, hi):
    """_TapsIR with nv (a literal, 1 to 4) vectors; addresses as integers, strides, the tail's
    offset and k in floats or taps, lo and hi float32."""
    if not isinstance(nv, types.IntegerLiteral):
        return None
    vecs, i64, f32 = nv.literal_value, types.int64, types.float32
    sig = types.void(nv, i64, i64, i64, i64, i64, i64, i64, i64, f32, f32)

    def codegen(context, builder, signature, args):
        _TapsIR(builder, vecs).emit(*args[1:])
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def depthwise_taps(x, w, bias, lo, hi, stride, dil, pad, out, r0, r1):
    """depthwise_line for float32 with 16 channels or more, each row's last axis contiguous:
    the same bytes, the channels of a row in registers."""
    n, length, c = x.shape
    ol, k = out.shape[1], w.shape[0]
    lo32, hi32 = np.float32(lo), np.float32(hi)
    xs, ws = dil * (x.strides[1] // 4), w.strides[0] // 4
    for row in range(r0, r1):
        b, o = row // ol, row % ol
        first = o * stride - pad
        i0 = 0 if first >= 0 else (-first + dil - 1) // dil   # the taps inside [0, length)
        i1 = min(k, (length - 1 - first) // dil + 1) if first < length else 0
        if i1 < i0:
            i1 = i0
        xp = x.ctypes.data + b * x.strides[0] + (first + i0 * dil) * x.strides[1]
        wp = w.ctypes.data + i0 * w.strides[0]
        op = out.ctypes.data + b * out.strides[0] + o * out.strides[1]
        bp, s = bias.ctypes.data, 0
        while c - s > 64:
            _taps(4, xp + 4 * s, xs, wp + 4 * s, ws, i1 - i0, bp + 4 * s, op + 4 * s, 48, lo32, hi32)
            s += 64
        if c - s < 16:   # past a block of 64: the last vector ends at the row's end
            s = c - 16
        nv, tail = (c - s + 15) // 16, c - s - 16
        if nv == 1:
            _taps(1, xp + 4 * s, xs, wp + 4 * s, ws, i1 - i0, bp + 4 * s, op + 4 * s, tail, lo32, hi32)
        elif nv == 2:
            _taps(2, xp + 4 * s, xs, wp + 4 * s, ws, i1 - i0, bp + 4 * s, op + 4 * s, tail, lo32, hi32)
        elif nv == 3:
            _taps(3, xp + 4 * s, xs, wp + 4 * s, ws, i1 - i0, bp + 4 * s, op + 4 * s, tail, lo32, hi32)
        else:
            _taps(4, xp + 4 * s, xs, wp + 4 * s, ws, i1 - i0, bp + 4 * s, op + 4 * s, tail, lo32, hi32)


@njit(**PAR)
def depthwise_taps_par(x, w, bias, lo, hi, stride, dil, pad, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        step = (rows + parts - 1) // parts
        depthwise_taps(x, w, bias, lo, hi, stride, dil, pad, out, min(p * step, rows), min((p + 1) * step, rows))


class _ReduceIR(TileIR):
    """`vecs` vectors of a row's channels (the last at float `tail`) summed (`is_max` 0) or
    maxed (1) over n rows xs floats apart, from 0 or -inf; a sum divided by `count`."""

    def __init__(self, builder, vecs: int, is_max: int):
        super().__init__(builder, 1, vecs, ir.VectorType(ir.FloatType(), 16))
        self.fptr, self.is_max = ir.FloatType().as_pointer(), is_max

    def emit(self, x_, xs_, n_, out_, tail_, count_):
        b, const = self.b, self.const
        x, out = b.inttoptr(x_, self.fptr), b.inttoptr(out_, self.fptr)
        offs = [const(16 * v) for v in range(self.vecs - 1)] + [tail_]

        def add(acc, v):
            return b.fadd(acc, v)

        def keep_max(acc, v):   # v where v > acc or v is NaN; a NaN in acc stays
            take = b.or_(b.fcmp_ordered(">", v, acc), b.fcmp_unordered("uno", v, v))
            return b.select(take, v, acc)
        op = keep_max if self.is_max else add

        def step(acc, i):
            row = b.gep(x, [b.mul(i, xs_)])
            return [[op(a, b.load(self.vptr(row, off), align=4)) for a, off in zip(acc[0], offs)]]

        start = self.splat(ir.Constant(ir.FloatType(), float("-inf") if self.is_max else 0.0))
        acc = self.counted_loop(b.append_basic_block("rows"), b.append_basic_block("rows_done"),
                                const(0), n_, 1, [[start] * self.vecs], step)
        count = self.splat(count_)
        for a, off in zip(acc[0], offs):
            b.store(a if self.is_max else b.fdiv(a, count), self.vptr(out, off), align=4)


@intrinsic(prefer_literal=True)
def _reduce(typingctx, nv, is_max, x, xs, n, out, tail, count):
    """_ReduceIR with nv (1 to 4) vectors, is_max literals; addresses as integers."""
    if not (isinstance(nv, types.IntegerLiteral) and isinstance(is_max, types.IntegerLiteral)):
        return None
    vecs, mode, i64 = nv.literal_value, is_max.literal_value, types.int64
    sig = types.void(nv, is_max, i64, i64, i64, i64, i64, types.float32)

    def codegen(context, builder, signature, args):
        _ReduceIR(builder, vecs, mode).emit(*args[2:])
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def _reduce_block(is_max, xp, xs, n, op, tail, count, nv):
    if is_max:
        if nv == 1:
            _reduce(1, 1, xp, xs, n, op, tail, count)
        elif nv == 2:
            _reduce(2, 1, xp, xs, n, op, tail, count)
        elif nv == 3:
            _reduce(3, 1, xp, xs, n, op, tail, count)
        else:
            _reduce(4, 1, xp, xs, n, op, tail, count)
    elif nv == 1:
        _reduce(1, 0, xp, xs, n, op, tail, count)
    elif nv == 2:
        _reduce(2, 0, xp, xs, n, op, tail, count)
    elif nv == 3:
        _reduce(3, 0, xp, xs, n, op, tail, count)
    else:
        _reduce(4, 0, xp, xs, n, op, tail, count)


@njit(**OPTS)
def global_pool(x, is_max, out, r0, r1):
    """out[b, :] = mean (or max) of x[b, :, :] over its pixels, for rows r0:r1 of
    (image, block of 64 channels): x [n, P, C] float32 with C >= 16 and each pixel's channels
    contiguous, out [n, C] likewise."""
    n, pixels, c = x.shape
    blocks = (c + 63) // 64
    xs, count = x.strides[1] // 4, np.float32(pixels)
    for row in range(r0, r1):
        b, s = row // blocks, (row % blocks) * 64
        if c - s < 16:   # the last block: its one vector ends at the row's end
            s = c - 16
        width = min(c - s, 64)
        nv = (width + 15) // 16
        _reduce_block(is_max, x.ctypes.data + b * x.strides[0] + 4 * s, xs, pixels,
                      out.ctypes.data + b * out.strides[0] + 4 * s, width - 16, count, nv)


@njit(**PAR)
def global_pool_par(x, is_max, out, parts):
    rows = x.shape[0] * ((x.shape[2] + 63) // 64)
    for p in prange(parts):
        step = (rows + parts - 1) // parts
        global_pool(x, is_max, out, min(p * step, rows), min((p + 1) * step, rows))
