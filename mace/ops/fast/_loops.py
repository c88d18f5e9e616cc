"""numba loops behind the fast kernels (imported only through _jit.loops()).

Each function writes into a preallocated output and fuses what numpy would do in
separate passes: the taps of a depthwise conv, the bias, the clip of a RELU /
RELUX / CLIP activation (lo, hi = -inf, inf when there is none). The innermost
loop runs over channels, contiguous in NHWC, so LLVM vectorizes it.

Each loop is serial over a row range (r0, r1). Threads come from the compute
pool only, which holds OpenBLAS at one thread meanwhile: numba's threads and
OpenBLAS's spinning ones fight over the cores otherwise (MobileNet v2 summed 8.5
ms per run with the workqueue layer, 281 ms with OpenMP, against 5.1 ms serial).

The compute pool's side (mace/ops/fast/_pool.py) is at the end: `gemm_parts` runs
a table of cblas_sgemm calls, one prange iteration per part (each part's GEMMs in
order on one thread, so beta=1 chains into one C stay ordered), calling cblas by
address (`_sgemm_at`, an LLVM-level indirect call: nothing process-specific is
baked in, so it caches like the rest); each `*_par` driver splits a serial loop
above into `parts` row ranges (or filter panels: `pgemm_panels_par`). Our own
packed GEMM (`pgemm`, its tile written as LLVM IR on the loop nest of `_tile_ir.py`,
which the int8 GEMM's tile shares) is in the middle.
They live in this file because numba's cache keys
a function on its own file only: a driver elsewhere would keep running a stale
copy of an edited loop. They are one near-identical driver per loop on purpose: one
generic driver taking the loop as an argument was measured: numba cannot cache a
function typed on a dispatcher (0.8 s of compiling in every process) and its launch
was 60% slower (16 vs 10 us).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from mace.ops.fast._isa import has
from mace.ops.fast._tile_ir import TileIR


OPTS = dict(cache=True, fastmath=True, nogil=True)


@intrinsic
def _store_at(typingctx, fn, at, rows, cols, ld, code, a, b, slope):
    """_act_loops.store_rows(at, rows, cols, ld, code, a, b, slope) at address fn (addresses as
    integers): the call by address keeps each file's numba cache its own."""
    i64, f32 = types.int64, types.float32
    sig = types.void(i64, i64, i64, i64, i64, i64, f32, f32, i64)

    def codegen(context, builder, signature, args):
        fptr = ir.FloatType().as_pointer()
        i64_, f32_ = ir.IntType(64), ir.FloatType()
        fnty = ir.FunctionType(ir.VoidType(), [fptr, i64_, i64_, i64_, i64_, f32_, f32_, fptr])
        fn_, at_, rows_, cols_, ld_, code_, a_, b_, slope_ = args
        callee = builder.inttoptr(fn_, fnty.as_pointer())
        builder.call(callee, [builder.inttoptr(at_, fptr), rows_, cols_, ld_, code_, a_, b_,
                              builder.inttoptr(slope_, fptr)])
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def _store(epi, at, rows, cols, ld, col0):
    """A fused activation over a block just stored: `rows` rows of `cols` floats from address
    `at`, `ld` floats apart, its first column col0 of the output (a PRELU's slope index).
    epi = (store_rows' address or 0 for none, code, a, b, slope address or 0): the kernels'
    _base.store_epilogue."""
    if epi[0] != 0:
        slope = epi[4] + col0 * 4 if epi[4] != 0 else 0
        _store_at(epi[0], at, rows, cols, ld, epi[1], epi[2], epi[3], slope)


@njit(inline="always", **OPTS)
def _depthwise5_row(xf, w9, bias, lo, hi, b, iy0, dil_h, dil_w, stride_w, pad_l, c, a0, a1, ofr, top, rows):
    """Output columns a0:a1 of one row of a 5x5 depthwise conv, filter rows top:top + rows: 16 channels
    at a time with the taps in registers (_dw_pixels; 8 without AVX-512), then 8, then the last
    c % 8 one at a time."""
    step, d = max(stride_w, 1) * c * 4, max(dil_w, 1) * c * 4
    at = xf[b, iy0 + top * dil_h].ctypes.data + max((a0 * stride_w - pad_l) * c, 0) * 4
    line = dil_h * xf.strides[1]
    wd = w9.ctypes.data + top * 5 * c * 4
    bd, od, npix = bias.ctypes.data, ofr.ctypes.data + max(a0, 0) * c * 4, a1 - a0
    c16, c8 = (c - c % 16) * (DW_LANES == 16), c - c % 8
    for cb in range(0, c16, 16):
        _dw_pixels(5, 16, at + cb * 4, line, step, d, wd + cb * 4, c * 4, bd + cb * 4, lo, hi, od + cb * 4,
                   c * 4, npix, rows)
    for cb in range(c16, c8, 8):
        _dw_pixels(5, 8, at + cb * 4, line, step, d, wd + cb * 4, c * 4, bd + cb * 4, lo, hi, od + cb * 4,
                   c * 4, npix, rows)
    for ch in range(c8, c):
        _dw_pixels(5, 1, at + ch * 4, line, step, d, wd + ch * 4, c * 4, bd + ch * 4, lo, hi, od + ch * 4,
                   c * 4, npix, rows)


# ---- the 3x3 and 5x5 depthwise interiors, 16 (or 8) channels at a time, taps in registers ----

# 16-channel blocks where a vector register holds 16 floats; else 8 (16 would take two registers
# each: a 5x5's 25 taps then spill)
DW_LANES = 16 if has("avx512f") else 8


@intrinsic
def _dw_pixels(typingctx, k, lanes, at, line, step, dil, w, wrow, bias, lo, hi, out, ostep, npix, rows):
    """npix output pixels x `lanes` (16, 8 or 1) channels of a k x k (3 or 5; both literals)
    depthwise conv whose filter rows 0:rows (1 <= rows <= k) lie inside the input (at and w: the
    first of them; a top or bottom border row has fewer) and all k columns:
    out[i] = clip(bias + sum_{a < rows, t < k} x[at + a * line + i * step + t * dil] * w[k * a + t],
    lo, hi), addresses and byte steps as int64, tap t's weights at w + t * wrow (_DwIR)."""
    if not (isinstance(k, types.IntegerLiteral) and k.literal_value in (3, 5)
            and isinstance(lanes, types.IntegerLiteral) and lanes.literal_value in (1, 8, 16)):
        return None
    size, n, i64 = k.literal_value, lanes.literal_value, types.int64
    sig = types.void(k, lanes, i64, i64, i64, i64, i64, i64, i64, types.float32, types.float32, i64,
                     i64, i64, i64)

    def codegen(context, builder, signature, args):
        builder.call(_DwIR.function(builder.module, size, n), args[2:])
        return context.get_dummy_value()
    return sig, codegen


class _DwIR:
    """_dw_pixels' IR: the k * k tap vectors and the bias loaded once, then one pass over the
    pixels, each k * k loads and multiply-adds in the scalar expression's order
    (llvm.fmuladd: fused exactly where the scalar loop's fastmath contraction fuses) and the
    clip as numba writes min(max(v, lo), hi) (compare and select), so the bytes are the scalar
    loop's, NaN included."""

    @classmethod
    def function(cls, module, k: int, lanes: int):
        """The loop as a function of its own in `module` (internal, never inlined): inlined into
        depthwise, its address registers went to the stack (the caller's many live values)."""
        name = f"mace_dw{k}_pixels_v{lanes}"
        if name in module.globals:
            return module.globals[name]
        i64, f32 = ir.IntType(64), ir.FloatType()
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64] * 7 + [f32, f32] + [i64] * 4), name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        cls(builder, k, lanes).emit(*fn.args)
        builder.ret_void()
        return fn

    def __init__(self, builder, k: int, lanes: int):
        from numba.core import cgutils

        self.b, self.k, self.i64, f32 = builder, k, ir.IntType(64), ir.FloatType()
        self.vec = ir.VectorType(f32, lanes)
        self.fmuladd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(self.vec, [self.vec] * 3), f"llvm.fmuladd.v{lanes}f32")

    def load(self, addr):
        return self.b.load(self.b.inttoptr(addr, self.vec.as_pointer()), align=4)

    def splat(self, x):
        i32, undef = ir.IntType(32), ir.Constant(self.vec, ir.Undefined)
        lanes = self.vec.count
        return self.b.shuffle_vector(self.b.insert_element(undef, x, ir.Constant(i32, 0)), undef,
                                     ir.Constant(ir.VectorType(i32, lanes), None))

    def clip(self, v, lo, hi):
        """min(max(v, lo), hi) as numba lowers it: select(lo > v, lo, v), then select(hi < m, hi, m)."""
        b = self.b
        m = b.select(b.fcmp_ordered(">", lo, v, flags=("fast",)), lo, v)
        return b.select(b.fcmp_ordered("<", hi, m, flags=("fast",)), hi, m)

    def emit(self, at, line, step, dil, w, wrow, bias, lo, hi, out, ostep, npix, rows):
        """A loop per row count 1..k (its taps in registers), the one for `rows` run."""
        b, c = self.b, lambda v: ir.Constant(self.i64, v)
        done = b.append_basic_block("dw_done")
        start = b.append_basic_block("dw_start")
        b.cbranch(b.icmp_signed(">", npix, c(0)), start, done)
        b.position_at_end(start)
        switch = b.switch(rows, done)
        for r in range(1, self.k + 1):
            block = b.append_basic_block(f"dw_rows{r}")
            switch.add_case(c(r), block)
            b.position_at_end(block)
            self.loop(r, (at, line, step, dil, w, wrow, bias, lo, hi, out, ostep, npix), done)
        b.position_at_end(done)

    def loop(self, rows: int, args, done):
        """From the current block: the pixels of a window `rows` filter rows by k columns, then
        to `done`."""
        at, line, step, dil, w, wrow, bias, lo, hi, out, ostep, npix = args
        b, c, k = self.b, lambda v: ir.Constant(self.i64, v), self.k
        taps = [self.load(b.add(w, b.mul(wrow, c(t)))) for t in range(rows * k)]
        bias_v, lo_v, hi_v = self.load(bias), self.splat(lo), self.splat(hi)
        # the taps' byte offsets from the window's corner, loop invariant: one address
        # register each (addresses recomputed from the pixel index made LLVM keep 36 induction
        # variables for a 3x3, mostly on the stack)
        offs = [b.add(b.mul(line, c(a)), b.mul(dil, c(t))) for a in range(rows) for t in range(k)]
        entry = b.block
        body = b.append_basic_block(f"dw_pixel{rows}")
        b.branch(body)
        b.position_at_end(body)
        i, src, dst = b.phi(self.i64), b.phi(self.i64), b.phi(self.i64)
        for phi, v in ((i, c(0)), (src, at), (dst, out)):
            phi.add_incoming(v, entry)
        acc = bias_v
        for t, off in enumerate(offs):
            acc = b.call(self.fmuladd, [self.load(b.add(src, off)), taps[t], acc])
        b.store(self.clip(acc, lo_v, hi_v), b.inttoptr(dst, self.vec.as_pointer()), align=4)
        nxt = b.add(i, c(1))
        for phi, v in ((i, nxt), (src, b.add(src, step)), (dst, b.add(dst, ostep))):
            phi.add_incoming(v, body)
        b.cbranch(b.icmp_signed("<", nxt, npix), body, done)


@njit(inline="always", **OPTS)
def _depthwise3_row(xf, w9, bias, lo, hi, b, iy0, dil_h, dil_w, stride_w, pad_l, c, a0, a1, ofr, top, rows):
    """Output columns a0:a1 of one row of a 3x3 depthwise conv, filter rows top:top + rows: 16
    channels at a time with the taps held in registers (_dw_pixels; 8 without AVX-512), then 8,
    then the last c % 8 one at a time. 112x112x16: 2-3x the channel-loop expression it replaced."""
    step, d = max(stride_w, 1) * c * 4, max(dil_w, 1) * c * 4
    at = xf[b, iy0 + top * dil_h].ctypes.data + max((a0 * stride_w - pad_l) * c, 0) * 4
    line = dil_h * xf.strides[1]
    wd = w9.ctypes.data + top * 3 * c * 4
    bd, od, npix = bias.ctypes.data, ofr.ctypes.data + max(a0, 0) * c * 4, a1 - a0
    c16, c8 = (c - c % 16) * (DW_LANES == 16), c - c % 8
    for cb in range(0, c16, 16):
        _dw_pixels(3, 16, at + cb * 4, line, step, d, wd + cb * 4, c * 4, bd + cb * 4, lo, hi, od + cb * 4,
                   c * 4, npix, rows)
    for cb in range(c16, c8, 8):
        _dw_pixels(3, 8, at + cb * 4, line, step, d, wd + cb * 4, c * 4, bd + cb * 4, lo, hi, od + cb * 4,
                   c * 4, npix, rows)
    for ch in range(c8, c):
        _dw_pixels(3, 1, at + ch * 4, line, step, d, wd + ch * 4, c * 4, bd + ch * 4, lo, hi, od + ch * 4,
                   c * 4, npix, rows)

@njit(**OPTS)
def depthwise(x, w, bias, lo, hi, epi, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, out, r0, r1):
    """out[n, y, x, c] = act(clip(bias[c] + sum_ij xpad[n, y*sh + i*dh, x*sw + j*dw, c] * w[i, j, c])),
    act the fused activation `epi` applied to each row as it is stored (_store; none: epi[0] == 0).

    Zero padding is implicit: taps outside the input are skipped. A 3x3 or 5x5 filter's
    pixels with all k taps along W inside run 16 channels at a time with the taps in registers
    (_depthwise3_row / _depthwise5_row: 1.3-2.7x the per-channel expression they replaced),
    over the filter rows inside the input (all k but on a top or bottom border row); the
    left and right border pixels, and other filter sizes, accumulate tap by tap over the
    column ranges left, in the same order. Output rows (image-major) r0:r1 only: the compute
    pool splits the rows across threads.
    """
    n, oh, ow, c = out.shape
    h, wd = x.shape[1], x.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    xf = x.reshape(n, h, wd * c)
    of = out.reshape(n, oh, ow * c)
    w9 = w.reshape(kh * kw, c)
    # output columns whose kw taps along W are all inside the input
    a0 = max(0, (pad_l + stride_w - 1) // stride_w)
    a1 = min(ow, (wd - (kw - 1) * dil_w + pad_l + stride_w - 1) // stride_w)
    for row in range(r0, r1):
        b, oy = row // oh, row % oh
        orow = out[b, oy]
        iy0 = oy * stride_h - pad_t
        # the filter rows inside the input, top:top + rows (fewer than kh on a border row)
        top = 0 if iy0 >= 0 else (dil_h - 1 - iy0) // dil_h
        rows = min(kh, (h - 1 - iy0) // dil_h + 1) - top if iy0 < h else 0
        if kh == 5 and kw == 5 and a1 > a0 and rows > 0:
            c0, c1 = a0, a1   # the columns with all five taps along W inside (_depthwise5_row)
            _depthwise5_row(xf, w9, bias, lo, hi, b, iy0, dil_h, dil_w, stride_w, pad_l, c, a0, a1,
                            of[b, oy], top, rows)
        elif kh == 3 and kw == 3 and a1 > a0 and rows > 0:
            c0, c1 = a0, a1   # the columns with all three taps along W inside (_depthwise3_row)
            _depthwise3_row(xf, w9, bias, lo, hi, b, iy0, dil_h, dil_w, stride_w, pad_l, c, a0, a1,
                            of[b, oy], top, rows)
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
        _store(epi, orow.ctypes.data, ow, c, c, 0)


@njit(**OPTS)
def bias_clip(out2d, bias, lo, hi, r0, r1):
    """In place, rows r0:r1: out2d[r, c] = clip(out2d[r, c] + bias[c], lo, hi)."""
    c = out2d.shape[1]
    for r in range(r0, r1):
        orow = out2d[r]
        for ch in range(c):
            orow[ch] = min(max(orow[ch] + bias[ch], lo), hi)



@njit(**OPTS)
def pool(x, is_max, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, scale, out, r0, r1):
    """Max (is_max) or average pooling, NHWC, output rows r0:r1, separably: each output
    row first reduces its window's input rows into one row `tmp` (long contiguous loops),
    then each pixel reduces its window's columns of `tmp` (all of a 2- or 3-wide window
    in one pass over the channels). Twice the speed of reducing tap by tap into the
    output (SqueezeNet's 3x3/2 on 111x111x64: 203 -> 118 us on one thread).

    Taps outside the input (padding, ceil_mode's overhang) are skipped: max over what
    is inside, the average sums it and multiplies by scale[y, x] (1 / the window's
    count, whatever count_include_pad says to count).
    """
    n, oh, ow, c = out.shape
    h, wd = x.shape[1], x.shape[2]
    tmp = np.empty((wd, c), np.float32)   # one per call: one allocation per thread and run
    tf = tmp.reshape(wd * c)
    for row in range(r0, r1):
        b, oy = row // oh, row % oh
        orow = out[b, oy]
        # vertical: tmp = reduce over the window's valid input rows, whole rows at once
        first = True
        for i in range(kh):
            iy = oy * stride_h - pad_t + i * dil_h
            if iy < 0 or iy >= h:
                continue
            xf = x[b, iy].reshape(wd * c)
            if first:
                for k in range(wd * c):
                    tf[k] = xf[k]
                first = False
            elif is_max:
                for k in range(wd * c):
                    tf[k] = max(tf[k], xf[k])
            else:
                for k in range(wd * c):
                    tf[k] += xf[k]
        if first:   # no valid row (cannot happen with sane pads): empty window
            for k in range(wd * c):
                tf[k] = -np.inf if is_max else 0.0
        # horizontal: out[ox] = reduce over valid taps of tmp[ox * s + j * d - pad_l]
        # interior pixels of 2- and 3-tap windows: one pass over the channels
        lo_ox = min(ow, max(0, (pad_l + stride_w - 1) // stride_w))
        hi_ox = max(lo_ox, min(ow, (wd - 1 - (kw - 1) * dil_w + pad_l) // stride_w + 1))
        if kw == 3 or kw == 2:
            for ox in range(lo_ox, hi_ox):
                o = orow[ox]
                x0 = ox * stride_w - pad_l
                t0 = tmp[x0]
                t1 = tmp[x0 + dil_w]
                if kw == 3:
                    t2 = tmp[x0 + 2 * dil_w]
                    if is_max:
                        for ch in range(c):
                            o[ch] = max(max(t0[ch], t1[ch]), t2[ch])
                    else:
                        f = scale[oy, ox]
                        for ch in range(c):
                            o[ch] = (t0[ch] + t1[ch] + t2[ch]) * f
                else:
                    if is_max:
                        for ch in range(c):
                            o[ch] = max(t0[ch], t1[ch])
                    else:
                        f = scale[oy, ox]
                        for ch in range(c):
                            o[ch] = (t0[ch] + t1[ch]) * f
        else:
            lo_ox = hi_ox = 0
        for ox in range(ow):
            if lo_ox <= ox < hi_ox:
                continue
            o = orow[ox]
            x0 = ox * stride_w - pad_l
            got = False
            for j in range(kw):
                ix = x0 + j * dil_w
                if ix < 0 or ix >= wd:
                    continue
                t = tmp[ix]
                if not got:
                    for ch in range(c):
                        o[ch] = t[ch]
                    got = True
                elif is_max:
                    for ch in range(c):
                        o[ch] = max(o[ch], t[ch])
                else:
                    for ch in range(c):
                        o[ch] += t[ch]
            if not got:
                for ch in range(c):
                    o[ch] = -np.inf if is_max else 0.0
            if not is_max:
                f = scale[oy, ox]
                for ch in range(c):
                    o[ch] *= f


@njit(**OPTS)
def dense_rows(x, w, bias, lo, hi, out, r0, r1):
    """out[r, o] = clip(bias[o] + sum_k x[r, k] * w[o, k]) for weight rows o in r0:r1: a
    FullyConnected with a few input rows, the weight streamed once per input row."""
    for r in range(x.shape[0]):
        xr, orow = x[r], out[r]
        k = xr.shape[0]
        for o in range(r0, r1):
            wr = w[o]
            acc = np.float32(0.0)
            for i in range(k):
                acc += xr[i] * wr[i]
            orow[o] = min(max(acc + bias[o], lo), hi)


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
def crop_clip(src, lo, hi, out, r0, r1):
    """out[y, x, c] = clip(src[y, x, c]) for x < out's width, rows r0:r1: src is computed on
    a padded width."""
    oh, ow, c = out.shape
    sf = src.reshape(src.shape[0], src.shape[1] * c)
    of = out.reshape(oh, ow * c)
    for y in range(r0, r1):
        s, o = sf[y], of[y]
        for k in range(ow * c):
            o[k] = min(max(s[k], lo), hi)


@njit(inline="always", cache=True, nogil=True)
def _clip_nan(v, lo, hi):
    v = lo if v < lo else v   # a NaN passes both, as np.clip's
    return hi if v > hi else v


# no fastmath: a NaN on either side must stay the result, as numpy's (fastmath's nnan let LLVM drop
# the checks: min / max took the other operand, a NaN sum was clipped to a number); the selects
# still vectorize
@njit(cache=True, nogil=True)
def binary_clip(a, b, code, lo, hi, out, r0, r1):
    """out = clip(a (+ - * min max)[code] b, lo, hi) over flat same-size arrays, one pass,
    elements r0:r1."""
    # sliced first: indices from range(n) are provably >= 0, so numba drops its
    # wraparound checks and the loops vectorize (indexing by range(r0, r1): 5x slower)
    a, b, out = a[r0:r1], b[r0:r1], out[r0:r1]
    n = out.shape[0]
    if code == 0:
        for i in range(n):
            out[i] = _clip_nan(a[i] + b[i], lo, hi)
    elif code == 1:
        for i in range(n):
            out[i] = _clip_nan(a[i] - b[i], lo, hi)
    elif code == 2:
        for i in range(n):
            out[i] = _clip_nan(a[i] * b[i], lo, hi)
    elif code == 3:   # np.minimum's NaN from either side
        for i in range(n):
            v, w = a[i], b[i]
            out[i] = _clip_nan(v if v < w or v != v else w, lo, hi)
    else:
        for i in range(n):
            v, w = a[i], b[i]
            out[i] = _clip_nan(v if v > w or v != v else w, lo, hi)


@njit(cache=True, nogil=True)   # no fastmath: x / scale stays a division, as onnxruntime's
def fake_quantize(x, scale, zero, lo, hi, out, r0, r1):
    """out = (clamp(rint(x / scale) + zero, lo, hi) - zero) * scale, flat elements r0:r1."""
    x, out = x[r0:r1], out[r0:r1]
    for i in range(out.shape[0]):
        out[i] = (min(max(np.rint(x[i] / scale) + zero, lo), hi) - zero) * scale


@njit(**OPTS)
def scale_shift_clip(x, scale, offset, lo, hi, out, r0, r1):
    """out[r, c] = clip(x[r, c] * scale[c] + offset[c], lo, hi), rows r0:r1: BatchNorm in one pass."""
    c = x.shape[1]
    for r in range(r0, r1):
        xr, orow = x[r], out[r]
        for ch in range(c):
            orow[ch] = min(max(xr[ch] * scale[ch] + offset[ch], lo), hi)


@njit(**OPTS)
def channel_shuffle(x, group, out, r0, r1):
    """out[r, i * group + j] = x[r, j * (C / group) + i] for rows r0:r1 of [pixels, C] arrays.
    The common group counts pass _interleave a constant (inlined: LLVM then vectorizes the
    interleaving, uint8 2.4-4x and float32 1.2-2x faster than the strided stores below)."""
    g = max(group, 1)
    per = max(x.shape[1] // g, 0)   # provably >= 0: no wraparound checks in the loop
    for r in range(r0, r1):
        xr, orow = x[r], out[r]
        if g == 2:
            _interleave(xr, orow, per, 2)
        elif g == 3:
            _interleave(xr, orow, per, 3)
        elif g == 4:
            _interleave(xr, orow, per, 4)
        elif g == 8:
            _interleave(xr, orow, per, 8)
        else:
            for j in range(g):
                src = xr[j * per:(j + 1) * per]
                for i in range(per):
                    orow[i * g + j] = src[i]


@njit(**OPTS)
def _interleave(xr, orow, per, g):
    """orow[i * g + j] = xr[j * per + i], i in order: one pass over the output."""
    for i in range(per):
        for j in range(g):
            orow[i * g + j] = xr[j * per + i]


@njit(**OPTS)
def copy_cols(x, out, col, r0, r1):
    """out[r, col:col + C] = x[r] for rows r0:r1 of [rows, C] x: one Concat input's place."""
    c = x.shape[1]
    for r in range(r0, r1):
        xr, orow = x[r], out[r, col:col + c]
        for i in range(c):
            orow[i] = xr[i]


@njit(**OPTS)
def narrow_transpose(x, out, r0, r1):
    """out[i, j] = x[j, i] for out's rows r0:r1, x [R, C] with R small (an NCHW image's
    channels): each of x's rows is read contiguously, the R-wide out rows written in turn."""
    o = out[r0:r1]
    for j in range(x.shape[0]):
        xs = x[j, r0:r1]
        for i in range(r1 - r0):
            o[i, j] = xs[i]


@njit(**OPTS)
def im2col(xp, cols, oy0, ow, sh, sw, dh, kwc, r0, r1):
    """Output rows r0:r1 of an im2col chunk whose first row is output row oy0: the row
    of pixel (r, x) is its kh windows of kw*C contiguous floats of the [Hp, Wp, C]
    padded image, side by side (the layout pack_filter's filter matches)."""
    hp, wp, c = xp.shape
    flat = xp.reshape(hp, wp * c)
    kh = cols.shape[1] // kwc
    for r in range(r0, r1):
        y = (oy0 + r) * sh
        for x in range(ow):
            dst = cols[r * ow + x]
            x0 = x * sw * c
            for ky in range(kh):
                src = flat[y + ky * dh, x0:x0 + kwc]
                d = dst[ky * kwc:(ky + 1) * kwc]
                for i in range(kwc):
                    d[i] = src[i]


@njit(**OPTS)
def reduce_pixels(x, kind, out):
    """out[b, c] = MEAN (kind 0) / SUM (1) / MAX (2) / MIN (3) of x[b, :, c] over [n, pixels, C]:
    a global pooling Reduce in one pass, the channel loop innermost."""
    n, pixels, c = x.shape
    for b in range(n):
        acc = out[b]
        for ch in range(c):
            acc[ch] = x[b, 0, ch]
        for p in range(1, pixels):
            xr = x[b, p]
            if kind <= 1:
                for ch in range(c):
                    acc[ch] += xr[ch]
            elif kind == 2:
                for ch in range(c):
                    acc[ch] = max(acc[ch], xr[ch])
            else:
                for ch in range(c):
                    acc[ch] = min(acc[ch], xr[ch])
        if kind == 0:
            inv = np.float32(1.0) / np.float32(pixels)
            for ch in range(c):
                acc[ch] *= inv


# ---- the packed GEMM -------------------------------------------------------------
#
# c = clip(a @ B + bias, lo, hi) with B (a conv's filter) packed once at load into
# panels [ceil(N / NR), K, NR] (zero-padded columns): each tile keeps MR x NR of c in
# vector registers through the whole k loop, B's panel row streamed as NR / 16 vectors,
# a's rows read in place (one broadcast per row and k). Nothing is packed per call,
# which is where OpenBLAS's sgemm loses on a conv's small products (it packs the whole
# filter on every call): single-threaded, 1.1-1.3x OpenBLAS's SkylakeX kernels on
# SqueezeNet / ResNet / VGG conv shapes, 1.5x on ResNet's 49-row ones (AMD EPYC, AVX-512).
# The tile is LLVM IR written through numba's intrinsic API (explicit <16 x float>
# fma chains): numba's own loops vectorize the k reduction badly (23 GMAC/s).
#
# Each of a tile's rows has its own address and its K runs in `nseg` segments of
# `seg_len` floats, `seg_stride` apart: a plain matrix is one segment per row, rows lda
# apart; a k x k conv reads its padded NHWC input in place (implicit im2col: row = output
# pixel, segment = one kernel row's kw * C contiguous floats), no window copy at all.

NR = 32
# rows per tile: 8 x 2 accumulator vectors (+ 2 of B, 1 broadcast) of AVX-512's 32
# registers, the k loop unrolled by 2. Once B's panels start on a cache line, the loop
# is bound by issue width, not the FMA ports: 6 x 2 spends 23 uops per 12 FMAs; 8 x 2
# unrolled 2x, 2 x (16 + 10) + 3 per 32 FMAs (in-process A/B on ResNet / VGG shapes, Cascade
# Lake: 6 x 2 51-57 GMAC/s, 8 x 2 x 2 57-64, 10-12 rows within noise of 8; peak 76).
# AVX2 has 16 registers of 8 floats.
MR = 8 if has("avx512f") else 3
# rows of a reused across all of B's panels before moving on (a's block stays in L2):
# every block streams all of B again, from L3 where B is big (a 3x3x512x512 filter is
# 9.4 MB). 192 rows against 64: VGG / ResNet 3x3 convs with K = 4608 1.08-1.15x, the
# others within noise (conv_pgemm, one thread, in-process A/B)
ROW_BLOCK = 192 if has("avx512f") else 8 * MR
UNROLL = 2
# the tile prefetches B's panel this many rows (of NR floats) ahead: the hardware streams
# B into L2, not L1 (+5-10% on L2-resident panels; ResNet-50's 7x7 layers, whose 9.4 MB
# filter comes from L3 on every call, 41 -> 51 GMAC/s; 8 to 32 rows within noise of 16)
PREFETCH = 16


@intrinsic(prefer_literal=True)
def _tile(typingctx, mr, nv, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi):
    """c[:mr, :16 nv] = clip(A @ b[:K, :16 nv] + bias[:16 nv], lo, hi), A's row i being
    `nseg` runs of `seg_len` floats from address rows[i], `seg_stride` floats apart
    (K = nseg * seg_len >= 1); addresses as integers, ldc in floats, b's rows NR floats
    apart; mr and nv compile-time constants."""
    if not isinstance(mr, types.IntegerLiteral) or not isinstance(nv, types.IntegerLiteral):
        return None
    nrows, vecs = mr.literal_value, nv.literal_value
    i64 = types.int64
    sig = types.void(mr, nv, i64, i64, i64, i64, i64, i64, i64, i64, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        _TileIR(builder, nrows, vecs).emit(*args[2:])
        return context.get_dummy_value()
    return sig, codegen


class _TileIR(TileIR):
    """The float tile's IR on the shared loop nest (_tile_ir.py): for each segment, the k loop
    UNROLL steps at a time, then the segment's last seg_len % UNROLL steps one at a time; each
    step an fma per row and vector, prefetching B's row PREFETCH ahead; bias and clip on the way
    out."""

    def __init__(self, builder, nrows: int, vecs: int):
        from numba.core import cgutils

        f32 = ir.FloatType()
        vec = ir.VectorType(f32, 16)
        self.fptr = f32.as_pointer()

        def fn(name, arity):
            return cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * arity),
                                                  f"llvm.{name}.v16f32")
        self.fma, self.vmax, self.vmin = fn("fma", 3), fn("maxnum", 2), fn("minnum", 2)
        super().__init__(builder, nrows, vecs, vec)

    def step(self, acc, a_rows, a_off, b_seg, k):
        """acc[i] += a[i][a_off + k] * b_seg[k] (B's row k as `vecs` vectors)."""
        b = self.b
        b_row = b.gep(b_seg, [b.mul(k, self.const(NR))])
        b_vecs = [b.load(self.vptr(b_row, self.const(16 * v)), align=4) for v in range(self.vecs)]
        for v in range(self.vecs):   # B's row k + PREFETCH into L1 (past the end: a no-op)
            self.prefetch(b.gep(b_row, [self.const(PREFETCH * NR + 16 * v)]))
        at = b.add(a_off, k)
        return [[b.call(self.fma, [self.splat(b.load(b.gep(a_rows[i], [at]), align=4)), bv, acc[i][v]])
                 for v, bv in enumerate(b_vecs)] for i in range(self.nrows)]

    def emit(self, rows_, nseg_, seg_len_, seg_stride_, b_, c_, ldc_, bias_, lo_, hi_):
        b, const = self.b, self.const
        rows_at = b.inttoptr(rows_, self.i64.as_pointer())
        a_rows = [b.inttoptr(b.load(b.gep(rows_at, [const(i)])), self.fptr) for i in range(self.nrows)]
        bmat, c, bias = (b.inttoptr(v, self.fptr) for v in (b_, c_, bias_))

        def segment(s, acc_s, blocks):
            """Segment s: its offsets in a's rows and in b, then k in range(0, main) UNROLL
            steps at a time and range(main, seg_len) one at a time."""
            body, rest_head, rest, seg_end = blocks
            a_off = b.mul(s, seg_stride_)
            b_seg = b.gep(bmat, [b.mul(b.mul(s, seg_len_), const(NR))])
            main = b.sub(seg_len_, b.srem(seg_len_, const(UNROLL)))

            def step(acc, k):
                return self.step(acc, a_rows, a_off, b_seg, k)
            acc_h = self.counted_loop(body, rest_head, const(0), main, UNROLL, acc_s, step)
            return self.counted_loop(rest, seg_end, main, seg_len_, 1, acc_h, step)
        acc_e = self.segments(nseg_, ("k_loop", "k_rest_head", "k_rest"), segment)
        # c = clip(acc + bias, lo, hi)
        lo, hi = self.splat(lo_), self.splat(hi_)
        bias_vecs = [b.load(self.vptr(bias, const(16 * v)), align=4) for v in range(self.vecs)]
        for i in range(self.nrows):
            c_row = b.gep(c, [b.mul(ldc_, const(i))])
            for v in range(self.vecs):
                y = b.call(self.vmin, [b.call(self.vmax, [b.fadd(acc_e[i][v], bias_vecs[v]), lo]), hi])
                b.store(y, self.vptr(c_row, const(16 * v)), align=4)


@njit(**OPTS)
def _tiles(r, nv, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi):
    """_tile for r (1..8) rows and nv (1, 2) vectors, constants as the intrinsic needs."""
    if nv == 2:
        if r == 8:
            _tile(8, 2, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
        elif r == 7:
            _tile(7, 2, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
        elif r == 6:
            _tile(6, 2, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
        elif r == 5:
            _tile(5, 2, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
        elif r == 4:
            _tile(4, 2, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
        elif r == 3:
            _tile(3, 2, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
        elif r == 2:
            _tile(2, 2, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
        else:
            _tile(1, 2, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
    elif r == 8:
        _tile(8, 1, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
    elif r == 7:
        _tile(7, 1, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
    elif r == 6:
        _tile(6, 1, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
    elif r == 5:
        _tile(5, 1, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
    elif r == 4:
        _tile(4, 1, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
    elif r == 3:
        _tile(3, 1, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
    elif r == 2:
        _tile(2, 1, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)
    else:
        _tile(1, 1, rows, nseg, seg_len, seg_stride, b, c, ldc, bias, lo, hi)


@njit(**OPTS)
def _pgemm(base, per_line, line_step, row_step, nseg, seg_len, seg_stride, panels, bias, lo, hi, epi, c,
           r0, r1, j0, j1):
    """c[r0:r1, panel columns j0:j1] = act(clip(A @ B + bias, lo, hi)), B packed as panels
    [P, K, NR], bias padded to P * NR, c with contiguous rows. A's row q starts at address
    base + (q // per_line) * line_step + (q % per_line) * row_step (bytes) and runs in
    segments (see _tile). Full panels are written in place, a ragged last one through a
    small tile buffer. The fused activation `epi` (_store) runs over each row block once its
    panels are stored, while the block is in cache."""
    n, ldc = c.shape[1], c.strides[0] // 4
    k = nseg * seg_len
    pb, pc, pbias = panels.ctypes.data, c.ctypes.data, bias.ctypes.data
    tmp = np.empty((MR, NR), np.float32)
    rows = np.empty(ROW_BLOCK + 2 * MR, np.int64)
    sizes = np.empty(ROW_BLOCK + 2 * MR, np.int64)
    ib = r0
    while ib < r1:
        # a short remainder joins its block: as a block of its own it would stream all of
        # B again for a few rows (ResNet-50's 49-row layers)
        ie = min(r1, ib + ROW_BLOCK)
        if r1 - ie < 2 * MR:
            ie = r1
        # the block's row addresses, once for all panels and without a division per row
        # (two 64-bit divisions per row and panel cost a small-K conv more than its FMAs)
        line, col = ib // per_line, ib % per_line
        for x in range(ie - ib):
            rows[x] = base + line * line_step + col * row_step
            col += 1
            if col == per_line:
                line, col = line + 1, 0
        # rows spread evenly over the block's tiles: 49 = 7 x 7, not 6 x 8 + 1 (a one-row
        # tile has 2 fma chains: latency-bound, near a full tile's time)
        count, x = 0, 0
        while x < ie - ib:
            sizes[count] = -(-(ie - ib - x) // -(-(ie - ib - x) // MR))
            x += sizes[count]
            count += 1
        for jb in range(j0, j1):
            n0 = jb * NR
            nw = min(NR, n - n0)
            nv = 2 if nw > 16 else 1
            b, bs = pb + jb * k * NR * 4, pbias + n0 * 4
            i = ib
            for t in range(count):
                r = sizes[t]
                at = rows.ctypes.data + (i - ib) * 8
                if nw == 16 * nv:
                    _tiles(r, nv, at, nseg, seg_len, seg_stride, b, pc + (i * ldc + n0) * 4, ldc, bs, lo, hi)
                else:
                    _tiles(r, nv, at, nseg, seg_len, seg_stride, b, tmp.ctypes.data, NR, bs, lo, hi)
                    for x in range(r):
                        for y in range(nw):
                            c[i + x, n0 + y] = tmp[x, y]
                i += r
        c0 = j0 * NR
        _store(epi, pc + (ib * ldc + c0) * 4, ie - ib, min(n, j1 * NR) - c0, ldc, c0)
        ib = ie


@njit(**OPTS)
def pgemm(a, panels, bias, lo, hi, epi, c, r0, r1):
    """Rows r0:r1 of c = act(clip(a @ B + bias, lo, hi)), a with contiguous rows, B packed,
    act the fused activation `epi` (_store)."""
    m, k = a.shape
    _pgemm(a.ctypes.data, max(m, 1), 0, a.strides[0], 1, k, 0, panels, bias, lo, hi, epi, c,
           r0, r1, 0, panels.shape[0])


@njit(**OPTS)
def pgemm_panels(a, panels, bias, lo, hi, epi, c, j0, j1):
    """Panels j0:j1 (columns j0 * NR: j1 * NR) of c = act(clip(a @ B + bias, lo, hi))."""
    m, k = a.shape
    _pgemm(a.ctypes.data, max(m, 1), 0, a.strides[0], 1, k, 0, panels, bias, lo, hi, epi, c,
           0, m, j0, j1)


@njit(**OPTS)
def pgemm_groups(a, panels, bias, lo, hi, epi, c, r0, r1):
    """Rows r0:r1 of a grouped 1x1 conv: group g's columns of c from its columns of a,
    its filter packed as panels[g] [P, K, NR], its bias bias[g] (padded to P * NR)."""
    k = panels.shape[2]
    og = c.shape[1] // panels.shape[0]
    for g in range(panels.shape[0]):
        ag = a[:, g * k:(g + 1) * k]
        slope = epi[4] + g * og * 4 if epi[4] != 0 else 0   # a PRELU's slope: the group's channels
        _pgemm(ag.ctypes.data, max(ag.shape[0], 1), 0, ag.strides[0], 1, k, 0, panels[g], bias[g], lo, hi,
               (epi[0], epi[1], epi[2], epi[3], slope), c[:, g * og:(g + 1) * og], r0, r1, 0, panels.shape[1])


@njit(**OPTS)
def _windows(xp, sh, sw, dh, kh, panels):
    """_pgemm's row addressing for a conv reading its windows in place from xp [Hp, Wp, C]
    (channels contiguous, by xp's strides: a 1x1 conv's group may be a channel slice):
    (line step, pixel step, segments, segment length, segment stride)."""
    line, pixel = xp.strides[0], xp.strides[1]
    return sh * line, sw * pixel, kh, panels.shape[1] // kh, dh * line // 4


@njit(**OPTS)
def conv_pgemm(xp, ow, sh, sw, dh, kh, panels, bias, lo, hi, epi, out2d, r0, r1):
    """Output rows r0:r1 of a k x k conv of one image straight from its padded NHWC input
    xp [Hp, Wp, C] (no column dilation): output pixel (y, x)'s A row is its window, kh
    runs of kw * C contiguous floats (kw from the packed filter's K)."""
    line, pixel, nseg, seg_len, seg_stride = _windows(xp, sh, sw, dh, kh, panels)
    _pgemm(xp.ctypes.data, ow, line, pixel, nseg, seg_len, seg_stride, panels, bias,
           lo, hi, epi, out2d, r0 * ow, r1 * ow, 0, panels.shape[0])


@njit(**OPTS)
def conv_pgemm_panels(xp, ow, sh, sw, dh, kh, panels, bias, lo, hi, epi, out2d, j0, j1):
    """conv_pgemm's panels j0:j1, all output rows."""
    line, pixel, nseg, seg_len, seg_stride = _windows(xp, sh, sw, dh, kh, panels)
    _pgemm(xp.ctypes.data, ow, line, pixel, nseg, seg_len, seg_stride, panels, bias,
           lo, hi, epi, out2d, 0, out2d.shape[0], j0, j1)


# ---- the compute pool's drivers -------------------------------------------------

PAR = dict(OPTS, parallel=True)
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
# gemm table columns: m, n, k, a, lda, b, ldb, c, ldc, flags (1: B transposed, 2: beta = 1,
# 4: a GEMV, m == 1: OpenBLAS's sgemm packs all of B for one row, 3x slower on VGG's FCs)
FIELDS = 10


@intrinsic
def _sgemm_at(typingctx, fn, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """cblas_sgemm(RowMajor, NoTrans, trans_b, m, n, k, 1, a, lda, b, ldb, beta, c, ldc) at
    address fn: 64-bit integers (numpy 2's OpenBLAS), pointers passed as integers."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64,
                     types.int64, types.int64, types.int64, types.int64, types.float32,
                     types.int64, types.int64)

    def codegen(context, builder, signature, args):
        i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
        ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, f32, ptr, i64,
                                               ptr, i64, f32, ptr, i64])
        (addr, tb, m_, n_, k_, a_, lda_, b_, ldb_, beta_, c_, ldc_) = args
        callee = builder.inttoptr(addr, fnty.as_pointer())
        builder.call(callee, [ir.Constant(i32, ROW_MAJOR), ir.Constant(i32, NO_TRANS),
                              builder.trunc(tb, i32), m_, n_, k_, ir.Constant(f32, 1.0),
                              builder.inttoptr(a_, ptr), lda_, builder.inttoptr(b_, ptr), ldb_,
                              beta_, builder.inttoptr(c_, ptr), ldc_])
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _sgemv_at(typingctx, fn, trans, rows, cols, a, lda, x, beta, y):
    """cblas_sgemv(RowMajor, trans, rows, cols, 1, a, lda, x, 1, beta, y, 1) at address fn."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64,
                     types.int64, types.int64, types.float32, types.int64)

    def codegen(context, builder, signature, args):
        i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
        ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i64, i64, f32, ptr, i64, ptr, i64,
                                               f32, ptr, i64])
        (addr, tr, rows_, cols_, a_, lda_, x_, beta_, y_) = args
        one = ir.Constant(i64, 1)
        callee = builder.inttoptr(addr, fnty.as_pointer())
        builder.call(callee, [ir.Constant(i32, ROW_MAJOR), builder.trunc(tr, i32), rows_, cols_,
                              ir.Constant(f32, 1.0), builder.inttoptr(a_, ptr), lda_,
                              builder.inttoptr(x_, ptr), one, beta_, builder.inttoptr(y_, ptr), one])
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def _run_gemm(fns, t):
    """One table row: a cblas_sgemm, or a cblas_sgemv when flagged."""
    beta = np.float32(1.0) if t[9] & 2 else np.float32(0.0)
    if t[9] & 4:   # c[0, :n] = a[0, :k] @ B: B's rows are c (B^T given) or a's
        if t[9] & 1:
            _sgemv_at(fns[1], NO_TRANS, t[1], t[2], t[5], t[6], t[3], beta, t[7])
        else:
            _sgemv_at(fns[1], TRANS, t[2], t[1], t[5], t[6], t[3], beta, t[7])
    else:
        trans_b = NO_TRANS + (TRANS - NO_TRANS) * (t[9] & 1)
        _sgemm_at(fns[0], trans_b, t[0], t[1], t[2], t[3], t[4], t[5], t[6], beta, t[7], t[8])


@njit(**OPTS)
def _run_part(fns, table, p):
    for j in range(table.shape[1]):
        t = table[p, j]
        if t[0] > 0:
            _run_gemm(fns, t)


@njit(**PAR)
def gemm_parts(fns, table):
    """table [parts, gemms, FIELDS]: part p's GEMMs in order, the parts in parallel;
    fns: addresses of cblas_sgemm and cblas_sgemv."""
    for p in prange(table.shape[0]):
        _run_part(fns, table, p)


@njit(**OPTS)
def gemm_serial(fns, table):
    for p in range(table.shape[0]):
        _run_part(fns, table, p)


@njit(**OPTS)
def _part(rows, parts, p):
    """Rows [r0, r1) of part p when `rows` rows are cut into `parts` near-equal ranges.

    The drivers below read `rows` from a shape before their prange: a shape read inside
    the parallel body cost ~1.4 us a launch (a 16k-float add: 1.6 us serial)."""
    step = (rows + parts - 1) // parts
    return min(rows, p * step), min(rows, (p + 1) * step)


@njit(**PAR)
def depthwise_par(x, w, bias, lo, hi, epi, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        depthwise(x, w, bias, lo, hi, epi, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, out, r0, r1)


@njit(**PAR)
def bias_clip_par(out2d, bias, lo, hi, parts):
    rows = out2d.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        bias_clip(out2d, bias, lo, hi, r0, r1)


@njit(**PAR)
def pool_par(x, is_max, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, scale, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        pool(x, is_max, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, scale, out, r0, r1)


@njit(**PAR)
def crop_clip_par(src, lo, hi, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        crop_clip(src, lo, hi, out, r0, r1)


# The drivers of the two loops compiled without fastmath are compiled without it too: numba
# compiles a loop a parallel driver calls with the driver's flags, and caches that code as the
# loop's own (a fastmath driver compiled first made binary_clip's MIN(NaN, x) return x in every
# later process, tests/ops/test_fast_loops_flags.py).
EXACT_PAR = dict(PAR, fastmath=False)


@njit(**EXACT_PAR)
def binary_clip_par(a, b, code, lo, hi, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        binary_clip(a, b, code, lo, hi, out, r0, r1)


@njit(**EXACT_PAR)
def fake_quantize_par(x, scale, zero, lo, hi, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        fake_quantize(x, scale, zero, lo, hi, out, r0, r1)


@njit(**PAR)
def scale_shift_clip_par(x, scale, offset, lo, hi, out, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        scale_shift_clip(x, scale, offset, lo, hi, out, r0, r1)


@njit(**PAR)
def channel_shuffle_par(x, group, out, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        channel_shuffle(x, group, out, r0, r1)


@njit(**PAR)
def copy_cols_par(x, out, col, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        copy_cols(x, out, col, r0, r1)


@njit(**PAR)
def im2col_par(xp, cols, oy0, ow, sh, sw, dh, kwc, parts):
    rows = cols.shape[0] // ow
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        im2col(xp, cols, oy0, ow, sh, sw, dh, kwc, r0, r1)


@njit(**PAR)
def narrow_transpose_par(x, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        narrow_transpose(x, out, r0, r1)


@njit(**PAR)
def dense_rows_par(x, w, bias, lo, hi, out, parts):
    rows = w.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        dense_rows(x, w, bias, lo, hi, out, r0, r1)


@njit(**PAR)
def pgemm_par(a, panels, bias, lo, hi, epi, c, parts):
    rows = a.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        pgemm(a, panels, bias, lo, hi, epi, c, r0, r1)


@njit(**PAR)
def pgemm_panels_par(a, panels, bias, lo, hi, epi, c, parts):
    count = panels.shape[0]
    for p in prange(parts):
        j0, j1 = _part(count, parts, p)
        pgemm_panels(a, panels, bias, lo, hi, epi, c, j0, j1)


@njit(**PAR)
def conv_pgemm_par(xp, ow, sh, sw, dh, kh, panels, bias, lo, hi, epi, out2d, parts):
    oh = out2d.shape[0] // ow
    for p in prange(parts):
        r0, r1 = _part(oh, parts, p)
        conv_pgemm(xp, ow, sh, sw, dh, kh, panels, bias, lo, hi, epi, out2d, r0, r1)


@njit(**PAR)
def conv_pgemm_panels_par(xp, ow, sh, sw, dh, kh, panels, bias, lo, hi, epi, out2d, parts):
    count = panels.shape[0]
    for p in prange(parts):
        j0, j1 = _part(count, parts, p)
        conv_pgemm_panels(xp, ow, sh, sw, dh, kh, panels, bias, lo, hi, epi, out2d, j0, j1)


@njit(**PAR)
def pgemm_groups_par(a, panels, bias, lo, hi, epi, c, parts):
    rows = a.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        pgemm_groups(a, panels, bias, lo, hi, epi, c, r0, r1)
