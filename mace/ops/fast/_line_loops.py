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
