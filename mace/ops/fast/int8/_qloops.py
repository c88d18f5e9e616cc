"""numba loops behind the fast int8 kernels (imported only through mace.ops.fast.int8._qjit).

The integer GEMM: c = requantize(A @ W' + corrections), A uint8 (activations, read in
place: implicit im2col), W' int8 packed once at load, int32 accumulation with the
CPU's dot-product instruction, the requantization (multiplier + shift, half up) and
the clamp fused into the tile's store. The numbers are the reference kernels' exactly
(mace/ops/int8/_gemm.py); how the terms split is in mace/ops/fast/int8/_qgemm.py.

The tile is LLVM IR written through numba's intrinsic API on the float packed GEMM's loop
nest (mace/ops/fast/_tile_ir.py: segments, counted k loops, accumulator phis, prefetch). Per
step of 4 k's, each row's 4 input bytes are broadcast to all 16 lanes and multiplied with 16
columns x 4 k's of W' (64 bytes):

  mode bit 0 set    AVX-512 VNNI `vpdpbusd` (uint8 x int8, 4 products summed into each int32
                    lane, no saturation): one instruction per row and vector.
  mode bit 0 clear  the same sum in plain LLVM IR (zero/sign extend, multiply, add the 4 lanes):
                    exact on any CPU, LLVM picks the instructions (AVX2: `vpmaddwd` family).
                    Not `vpmaddubsw`: its int16 pair sums saturate (255 * 127 * 2 > 32767).
  mode bit 1 (SHORT) the epilogue in int32 lanes but for the multiply, where QPanels proved
                    the general one's extra steps no-ops (the per-channel common case).
  mode bit 2 (RAW)   no requantization: the exact int32 sums (acc + corr + window sum * d)
                    stored as int32 (MatMulInteger's output; corr set per run from A's
                    run-time zero point).

Also here: the window sums a per-tensor uint8 weight needs, the compute pool's drivers
(split by output lines or by filter panels) and the other int8 loops (depthwise conv,
pooling, softmax, the table lookups of eltwise, activations and rescales). They live in
one file because numba's cache keys a function on its own file only (see
mace/ops/fast/_loops.py).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from mace.ops.fast._isa import has
from mace.ops.fast._tile_ir import TileIR, splat as _splat


OPTS = dict(cache=True, nogil=True)
PAR = dict(OPTS, parallel=True)
# 1: the host has AVX-512 VNNI (vpdpbusd); 0: the portable tile
VNNI = 1 if has("avx512vnni") else 0
# 1: the host has AVX-512 VBMI (vpermi2b: a 128-byte table lookup per instruction); 0: gathers
VBMI = 1 if has("avx512vbmi") else 0
NR = 32            # columns of a packed panel (two 16-lane int32 vectors)
KB = 4             # k's per dot-product step: a panel row is NR x KB bytes
# rows per tile: 12 x 2 int32 accumulators (+ 2 of W', broadcasts) fit AVX-512's 32
# registers (12 rows against 6: VGG-19 quantized ~15% faster, ResNet-50, MobileNet v2 and
# SqueezeNet 5-20%, each A/B in one process); AVX2's 16 registers of 8 lanes hold a 16-lane
# vector in two
MR = 12 if has("avx512f") else 2
ROW_BLOCK = 8 * MR
# the tile prefetches its panel this many k steps ahead, as the float tile does (1-8% per
# conv, 8-16% on ResNet-50's 7x7x512 3x3 one; in-process A/B)
PREFETCH = 16
# tile modes (a literal): bit 0 the dot-product instruction, bit 1 the short epilogue, bit 2
# the int32 sums stored as they are
VNNI_MODE, SHORT, RAW = 1, 2, 4
# AVX-512BW: the 512-bit vpmaddwd and packs; without it their plain IR forms (LLVM splits them)
BW = has("avx512bw")


def _x86(builder, name, ret, *args):
    """A call of the LLVM intrinsic `name` (an x86 one, or the generic llvm.prefetch) returning `ret`."""
    from numba.core import cgutils
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return builder.call(fn, list(args))


def _dpbusd(builder, acc, a, b, vnni):
    """acc + per int32 lane the sum of a's 4 uint8 x b's 4 int8 (all <16 x i32>): vpdpbusd
    where `vnni` is asked for and the target has it, else the same sum in plain IR (zero /
    sign extend, multiply, add the 4 lanes): exact on any CPU, LLVM picks the instructions
    (AVX2: the vpmaddwd family). Not vpmaddubsw: its int16 pair sums saturate (255 * 127 *
    2 > 32767). (The GEMM's dispatch compiles its VNNI tiles on every target; without the
    instruction they are never run, but must still compile.)"""
    if vnni and VNNI:
        return _x86(builder, "llvm.x86.avx512.vpdpbusd.512", acc.type, acc, a, b)
    vb, wide = ir.VectorType(ir.IntType(8), 64), ir.VectorType(ir.IntType(32), 64)
    prod = builder.mul(builder.zext(builder.bitcast(a, vb), wide), builder.sext(builder.bitcast(b, vb), wide))
    parts = [builder.shuffle_vector(prod, prod, ir.Constant(acc.type, [4 * j + q for j in range(16)]))
             for q in range(4)]
    return builder.add(acc, builder.add(builder.add(parts[0], parts[1]), builder.add(parts[2], parts[3])))


def _pmaddwd(builder, x, y):
    """<32 x i16> x, y -> <16 x i32>: lane j = x[2j] * y[2j] + x[2j+1] * y[2j+1] (vpmaddwd;
    exact unless all four factors are -32768)."""
    v32 = ir.VectorType(ir.IntType(32), 16)
    if BW:
        return _x86(builder, "llvm.x86.avx512.pmaddw.d.512", v32, x, y)
    wide = ir.VectorType(ir.IntType(32), 32)
    prod = builder.mul(builder.sext(x, wide), builder.sext(y, wide))
    even, odd = (builder.shuffle_vector(prod, prod, ir.Constant(v32, [2 * j + q for j in range(16)])) for q in (0, 1))
    return builder.add(even, odd)


def _pack(builder, x, y, signed):
    """x86 packssdw (signed: <16 x i32> pair -> <32 x i16>) or packuswb (<32 x i16> pair ->
    <64 x i8>, unsigned): per 128-bit lane x's elements then y's, each saturated to the
    narrow type -- the inverse of _unpack_lanes. The intrinsic where the target has AVX-512BW,
    else plain IR (clamp, truncate, shuffle)."""
    n, width = x.type.count, x.type.element.width // 2
    narrow = ir.VectorType(ir.IntType(width), 2 * n)
    if BW:
        return _x86(builder, "llvm.x86.avx512.packssdw.512" if signed else "llvm.x86.avx512.packuswb.512",
                    narrow, x, y)
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    lo, hi = ir.Constant(x.type, [lo] * n), ir.Constant(x.type, [hi] * n)

    def sat(v):
        v = builder.select(builder.icmp_signed("<", v, lo), lo, v)
        return builder.trunc(builder.select(builder.icmp_signed(">", v, hi), hi, v), ir.VectorType(ir.IntType(width), n))
    per = n // 4
    mask = [src + lane * per + i for lane in range(4) for src in (0, n) for i in range(per)]
    return builder.shuffle_vector(sat(x), sat(y), ir.Constant(ir.VectorType(ir.IntType(32), 2 * n), mask))


# epilogue table rows (int64, per output column): what _qgemm.QPanels packs
EP_CORR, EP_D, EP_LEFT, EP_MULT, EP_ROUND, EP_SHIFT = range(6)
EP_ROWS = 6


@intrinsic(prefer_literal=True)
def _qtile(typingctx, mr, nv, dot, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, ep_stride,
           zero, qmin, qmax):
    """c[:mr, :16 nv] (uint8) = clamp(zero + requantize(A @ b + epilogue terms), qmin, qmax).

    A's row i: `nseg` runs of 4 * seg4 bytes from address rows[i], seg_stride bytes
    apart; b: panel rows of NR * 4 int8 (column-major within 4 k's); rsum[i]: row i's
    window sum (int64); ep: the int64 epilogue table [EP_ROWS, ...] at this panel's
    column, ep_stride elements between its rows; ldc in bytes. mr, nv, dot literals; dot
    (the mode): bit 0 vpdpbusd, bit 1 the short epilogue (SHORT: no window sums, no left
    shift, no int32 clip needed, a multiplier below 2^-1)."""
    lits = (mr, nv, dot)
    if not all(isinstance(x, types.IntegerLiteral) for x in lits):
        return None
    nrows, vecs, mode = (x.literal_value for x in lits)
    i64 = types.int64
    sig = types.void(mr, nv, dot, *([i64] * 13))

    def codegen(context, builder, signature, args):
        _qtile_ir(builder, nrows, vecs, mode, *args[3:])
        return context.get_dummy_value()
    return sig, codegen


def _qtile_ir(builder, nrows, vecs, mode, rows_, rsum_, nseg_, seg4_, seg_stride_, b_, c_, ldc_,
              ep_, ep_stride_, zero_, qmin_, qmax_):
    """The int8 tile on the float tile's loop nest (_tile_ir.py): per segment one k loop of
    dot-product steps (4 k's each), then the requantizing store."""
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    v32 = ir.VectorType(i32, 16)
    i8p = i8.as_pointer()
    tile = TileIR(builder, nrows, vecs, v32)
    const = tile.const

    def splat(x, vec):
        return _splat(builder, x, vec)

    def load(ptr, offset, ty, align=1):
        return builder.load(builder.bitcast(builder.gep(ptr, [offset]), ty.as_pointer()), align=align)

    rows_at = builder.inttoptr(rows_, i64.as_pointer())
    rsum_at = builder.inttoptr(rsum_, i64.as_pointer())
    a_rows = [builder.inttoptr(builder.load(builder.gep(rows_at, [const(i)])), i8p) for i in range(nrows)]
    b, c = builder.inttoptr(b_, i8p), builder.inttoptr(c_, i8p)
    ep = builder.inttoptr(ep_, i64.as_pointer())

    def segment(s, acc_s, blocks):
        """Segment s: its offsets in A's rows and in b, then for k in range(seg4):
        acc[i] += dot(A[i][a_off + 4k : +4], b_seg[k])."""
        body, seg_end = blocks
        a_off = builder.mul(s, seg_stride_)
        b_seg = builder.gep(b, [builder.mul(builder.mul(s, seg4_), const(NR * KB))])

        def step(acc, k):
            b_row = builder.gep(b_seg, [builder.mul(k, const(NR * KB))])
            b_vecs = [load(b_row, const(64 * v), v32) for v in range(vecs)]
            for v in range(vecs):   # W's step k + PREFETCH into L1
                tile.prefetch(builder.gep(b_row, [const(PREFETCH * NR * KB + 64 * v)]))
            at = builder.add(a_off, builder.mul(k, const(KB)))
            new = []
            for i in range(nrows):   # per lane the sum of 4 uint8 (a4's bytes) x int8 (bv's 4 bytes)
                a4 = splat(load(a_rows[i], at, i32), v32)
                new.append([_dpbusd(builder, acc[i][v], a4, b_vecs[v], mode & VNNI_MODE) for v in range(vecs)])
            return new
        return tile.counted_loop(body, seg_end, const(0), seg4_, 1, acc_s, step)
    acc = tile.segments(nseg_, ("k_loop",), segment)
    if mode & RAW:
        _qstore_raw(builder, nrows, vecs, acc, rsum_at, c, ldc_, ep, ep_stride_, splat, load)
        return
    store = _qstore_short if mode & SHORT else _qstore
    store(builder, nrows, vecs, acc, rsum_at, c, ldc_, ep, ep_stride_, zero_, qmin_, qmax_, splat, load)


def _qstore_raw(builder, nrows, vecs, acc, rsum_at, c, ldc_, ep, ep_stride_, splat, load):
    """The exact sums as int32 (mode RAW): acc + corr + rsum * d, each term taken modulo 2^32,
    which is the int32 result itself wherever that fits int32 (it always does below MAX_K)."""
    i32, i64 = ir.IntType(32), ir.IntType(64)
    v32, v64 = ir.VectorType(i32, 16), ir.VectorType(i64, 16)

    def const(v):
        return ir.Constant(i64, v)

    def row(r, v):
        return builder.trunc(load(ep, builder.add(builder.mul(ep_stride_, const(r)), const(16 * v)), v64, 8), v32)
    corr, d = [row(EP_CORR, v) for v in range(vecs)], [row(EP_D, v) for v in range(vecs)]
    for i in range(nrows):
        rs = splat(builder.trunc(builder.load(builder.gep(rsum_at, [const(i)])), i32), v32)
        c_row = builder.gep(c, [builder.mul(ldc_, const(i))])
        for v in range(vecs):
            t = builder.add(builder.add(acc[i][v], corr[v]), builder.mul(rs, d[v]))
            builder.store(t, builder.bitcast(builder.gep(c_row, [const(64 * v)]), v32.as_pointer()), align=4)


def _qstore_short(builder, nrows, vecs, acc, rsum_at, c, ldc_, ep, ep_stride_, zero_, qmin_, qmax_, splat,
                  load):
    """_qstore where QPanels proved the rest a no-op (mode SHORT): t = acc + corr in int32
    lanes (no overflow), (t * M + round) >> shift in int64, the result (|t| / 2 at most)
    back in int32 lanes, + zero, clamped, stored as bytes. The 64-bit products of even and
    odd lanes are taken in place (t's int32 lanes seen as int64 pairs, each half
    sign-extended where it lies: LLVM's vpmuldq reads the low half of every int64 lane) and
    interleaved back by one permute, instead of widening all 16 lanes to int64 and packing
    them back (6 shuffles per 16 outputs; a small-K conv's time is mostly this store)."""
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    v32, v64, h64 = ir.VectorType(i32, 16), ir.VectorType(i64, 16), ir.VectorType(i64, 8)
    k32 = ir.Constant(h64, [32] * 8)
    lanes = ir.VectorType(i32, 8)

    def const(v):
        return ir.Constant(i64, v)

    def row(r, v):
        return load(ep, builder.add(builder.mul(ep_stride_, const(r)), const(16 * v)), v64, 8)

    def half(x, odd):   # lanes 2j + odd of a <16 x i64>
        return builder.shuffle_vector(x, x, ir.Constant(lanes, [2 * j + odd for j in range(8)]))

    def low32(x):       # each int64 lane's low half, sign-extended in place
        return builder.ashr(builder.shl(x, k32), k32)

    corr = [builder.trunc(row(EP_CORR, v), v32) for v in range(vecs)]
    mult = [[low32(half(row(EP_MULT, v), odd)) for odd in (0, 1)] for v in range(vecs)]
    rnd = [[half(row(EP_ROUND, v), odd) for odd in (0, 1)] for v in range(vecs)]
    shift = [[half(row(EP_SHIFT, v), odd) for odd in (0, 1)] for v in range(vecs)]
    zero, qmin, qmax = (splat(builder.trunc(x, i32), v32) for x in (zero_, qmin_, qmax_))
    weave = ir.Constant(ir.VectorType(i32, 16), [j // 2 * 2 + (16 if j % 2 else 0) for j in range(16)])
    for i in range(nrows):
        c_row = builder.gep(c, [builder.mul(ldc_, const(i))])
        for v in range(vecs):
            pairs = builder.bitcast(builder.add(acc[i][v], corr[v]), h64)
            parts = []
            for odd, t in ((0, low32(pairs)), (1, builder.ashr(pairs, k32))):
                t = builder.ashr(builder.add(builder.mul(t, mult[v][odd]), rnd[v][odd]), shift[v][odd])
                parts.append(builder.bitcast(t, v32))
            t = builder.add(builder.shuffle_vector(parts[0], parts[1], weave), zero)
            t = builder.select(builder.icmp_signed("<", t, qmin), qmin, t)
            t = builder.select(builder.icmp_signed(">", t, qmax), qmax, t)
            builder.store(builder.trunc(t, ir.VectorType(i8, 16)),
                          builder.bitcast(builder.gep(c_row, [const(16 * v)]),
                                          ir.VectorType(i8, 16).as_pointer()), align=1)


def _qstore(builder, nrows, vecs, acc, rsum_at, c, ldc_, ep, ep_stride_, zero_, qmin_, qmax_, splat, load):
    """The fused output stage, in int64 lanes as mace/ir/quant_params.requantize does it:
    t = acc + corr + rsum * d, clipped to int32; ((t << left) * M + round) >> shift;
    + zero, clamped to [qmin, qmax], stored as bytes."""
    i8, i64 = ir.IntType(8), ir.IntType(64)
    v64 = ir.VectorType(i64, 16)

    def const(v):
        return ir.Constant(i64, v)

    def clamp(x, lo, hi):
        x = builder.select(builder.icmp_signed("<", x, lo), lo, x)
        return builder.select(builder.icmp_signed(">", x, hi), hi, x)

    table = [[load(ep, builder.add(builder.mul(ep_stride_, const(r)), const(16 * v)), v64, 8)
              for v in range(vecs)] for r in range(EP_ROWS)]
    lo32, hi32 = splat(const(-2**31), v64), splat(const(2**31 - 1), v64)
    zero, qmin, qmax = (splat(x, v64) for x in (zero_, qmin_, qmax_))
    for i in range(nrows):
        rs = splat(builder.load(builder.gep(rsum_at, [const(i)])), v64)
        c_row = builder.gep(c, [builder.mul(ldc_, const(i))])
        for v in range(vecs):
            t = builder.add(builder.sext(acc[i][v], v64), table[EP_CORR][v])
            t = clamp(builder.add(t, builder.mul(rs, table[EP_D][v])), lo32, hi32)
            t = builder.mul(builder.shl(t, table[EP_LEFT][v]), table[EP_MULT][v])
            t = builder.ashr(builder.add(t, table[EP_ROUND][v]), table[EP_SHIFT][v])
            t = clamp(builder.add(t, zero), qmin, qmax)
            out = builder.trunc(t, ir.VectorType(i8, 16))
            builder.store(out, builder.bitcast(builder.gep(c_row, [const(16 * v)]),
                                               ir.VectorType(i8, 16).as_pointer()), align=1)


@njit(**OPTS)
def _qtiles(mode, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax):
    """_qtile for the mode, r rows (_tile_rows) and nv (1, 2) vectors, as literals. (VNNI, a
    global, is a constant to numba: a target without it never compiles the VNNI tiles.)"""
    if mode & RAW:   # one set of tiles per host: VNNI's or the portable ones
        if VNNI:
            _qtiles_vnni(5, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
        else:
            _qtiles_portable(4, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin,
                             qmax)
    elif VNNI and mode == 3:
        _qtiles_vnni(3, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    elif VNNI and mode == 1:
        _qtiles_vnni(1, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    elif mode == 2:
        _qtiles_portable(2, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    else:
        _qtiles_portable(0, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)


@njit(**OPTS)
def _qtiles_vnni(m, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax):
    """m: a literal mode with the VNNI bit; r one of _tile_rows' sizes (12, 8, 4, 2, 1)."""
    if nv == 2:
        if r == 12:
            _qtile(12, 2, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
        elif r == 8:
            _qtile(8, 2, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
        elif r == 4:
            _qtile(4, 2, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
        elif r == 2:
            _qtile(2, 2, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
        else:
            _qtile(1, 2, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    elif r == 12:
        _qtile(12, 1, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    elif r == 8:
        _qtile(8, 1, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    elif r == 4:
        _qtile(4, 1, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    elif r == 2:
        _qtile(2, 1, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    else:
        _qtile(1, 1, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)


@njit(**OPTS)
def _qtiles_portable(m, r, nv, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax):
    """m: a literal mode without the VNNI bit; r up to 2 rows (MR where there is no AVX-512)."""
    if nv == 2:
        if r >= 2:
            _qtile(2, 2, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
        else:
            _qtile(1, 2, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    elif r >= 2:
        _qtile(2, 1, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)
    else:
        _qtile(1, 1, m, rows, rsum, nseg, seg4, seg_stride, b, c, ldc, ep, eps, zero, qmin, qmax)


@njit(**OPTS)
def _tile_rows(mr, left):
    """Rows of the next tile: mr, else the largest of 8, 4, 2, 1 that fits. Every size is a
    tile compiled apart, so remainders go in few sizes: all of 1..12 doubled numba's first
    compile of this module (41 -> 81 s)."""
    if left >= mr:
        return mr
    if left >= 8:
        return 8
    if left >= 4:
        return 4
    return 2 if left >= 2 else 1


@njit(**OPTS)
def _qgemm(dot, base, per_line, line_step, row_step, nseg, seg_stride, panels, ksteps, koffs, ep,
           rowsum, zero, qmin, qmax, c, r0, r1, j0, j1):
    """c[r0:r1, panel columns j0:j1] (uint8, or int32 in mode RAW; contiguous rows) from A's
    rows r0:r1: row q starts at address base + (q // per_line) * line_step + (q % per_line) *
    row_step and runs in segments (see _qtile); panels [P, nseg * seg4, NR * KB] int8, of which panel j
    uses ksteps[j] steps per segment from A's byte koffs[j] (_qgemm.QPanels: seg4 and 0 but
    for a grouped 1x1 conv's column runs); ep [EP_ROWS, P * NR] int64; rowsum [rows] int64
    window sums, or empty (no per-tensor term). Full panels are stored in place, a ragged
    last one through a small tile buffer."""
    n, ldc, size = c.shape[1], c.strides[0], c.itemsize
    mr = MR if dot & VNNI_MODE else 2
    pb, pc, pe = panels.ctypes.data, c.ctypes.data, ep.ctypes.data
    kstep = panels.shape[1] * NR * KB
    eps = ep.shape[1]
    tmp = np.empty((MR, NR), c.dtype)
    offs = np.empty(ROW_BLOCK, np.int64)
    rows = np.empty(ROW_BLOCK, np.int64)
    rs = np.zeros(ROW_BLOCK, np.int64)
    has_sums = rowsum.shape[0] > 0
    for ib in range(r0, r1, ROW_BLOCK):
        ie = min(r1, ib + ROW_BLOCK)
        # the block's A row offsets, walked pixel by pixel: one division per block, not two
        # per row and panel (with a few k steps, as in a 3-channel first conv, those
        # divisions took as long as the tile)
        line, col = ib // per_line, ib % per_line
        for q in range(ie - ib):
            offs[q] = line * line_step + col * row_step
            if has_sums:
                rs[q] = rowsum[ib + q]
            col += 1
            if col == per_line:
                col = 0
                line += 1
        # the row addresses, made again only where a panel starts elsewhere in A's rows (a
        # grouped 1x1 conv's column runs): once per block otherwise, not per tile and panel
        # (small-K 1x1 convs, MobileNet v2's 16- and 24-channel ones, 1.3x)
        koff = -1
        for jb in range(j0, j1):
            n0 = jb * NR
            nw = min(NR, n - n0)
            nv = 2 if nw > 16 else 1
            b, e = pb + jb * kstep, pe + n0 * 8
            seg4 = ksteps[jb]
            if koffs[jb] != koff:
                koff = koffs[jb]
                for q in range(ie - ib):
                    rows[q] = base + koff + offs[q]
            i = ib
            while i < ie:
                r = _tile_rows(mr, ie - i)
                rp, sp = rows.ctypes.data + (i - ib) * 8, rs.ctypes.data + (i - ib) * 8
                if nw == 16 * nv:
                    _qtiles(dot, r, nv, rp, sp, nseg, seg4, seg_stride, b, pc + i * ldc + n0 * size, ldc, e,
                            eps, zero, qmin, qmax)
                else:
                    _qtiles(dot, r, nv, rp, sp, nseg, seg4, seg_stride, b, tmp.ctypes.data, NR * size, e, eps,
                            zero, qmin, qmax)
                    for x in range(r):
                        for y in range(nw):
                            c[i + x, n0 + y] = tmp[x, y]
                i += r


@njit(**OPTS)
def window_sums(xp, ow, sh, sw, dh, kh, kwc, out, r0, r1):
    """out[q] = the sum of output pixel q's window (kh runs of kwc bytes) in xp [Hp, Wp, C],
    output lines r0:r1 (pixels r0 * ow : r1 * ow)."""
    flat = xp.reshape(-1)
    line, pixel = xp.shape[1] * xp.shape[2], xp.shape[2]
    for oy in range(r0, r1):
        for ox in range(ow):
            start = oy * sh * line + ox * sw * pixel
            total = 0
            for i in range(kh):
                at = start + i * dh * line
                for j in range(kwc):
                    total += flat[at + j]
            out[oy * ow + ox] = total


@njit(**OPTS)
def qconv(dot, xp, ow, sh, sw, dh, kh, panels, ksteps, koffs, ep, rowsum, zero, qmin, qmax, out2d,
          r0, r1):
    """Output lines r0:r1 of a conv of one image from its padded uint8 input xp [Hp, Wp, C]
    (C-contiguous, a few bytes of slack after it when a window row's bytes are not a
    multiple of 4): output pixel (y, x)'s A row is its window, kh runs of kw * C bytes
    (ksteps, koffs: _qgemm's)."""
    line, pixel = xp.shape[1] * xp.shape[2], xp.shape[2]
    _qgemm(dot, xp.ctypes.data, ow, sh * line, sw * pixel, kh, dh * line, panels, ksteps, koffs, ep,
           rowsum, zero, qmin, qmax, out2d, r0 * ow, r1 * ow, 0, panels.shape[0])


@njit(**OPTS)
def qconv_panels(dot, xp, ow, sh, sw, dh, kh, panels, ksteps, koffs, ep, rowsum, zero, qmin, qmax,
                 out2d, j0, j1):
    """qconv's panels j0:j1 (columns j0 * NR : j1 * NR), all output lines."""
    line, pixel = xp.shape[1] * xp.shape[2], xp.shape[2]
    _qgemm(dot, xp.ctypes.data, ow, sh * line, sw * pixel, kh, dh * line, panels, ksteps, koffs, ep,
           rowsum, zero, qmin, qmax, out2d, 0, out2d.shape[0], j0, j1)


# ---- the compute pool's drivers -------------------------------------------------

@njit(**OPTS)
def _part(rows, parts, p):
    step = (rows + parts - 1) // parts
    return min(rows, p * step), min(rows, (p + 1) * step)


@njit(**PAR)
def qconv_par(dot, xp, ow, sh, sw, dh, kh, panels, ksteps, koffs, ep, rowsum, zero, qmin, qmax, out2d,
              parts):
    lines = out2d.shape[0] // ow
    for p in prange(parts):
        r0, r1 = _part(lines, parts, p)
        qconv(dot, xp, ow, sh, sw, dh, kh, panels, ksteps, koffs, ep, rowsum, zero, qmin, qmax, out2d,
              r0, r1)


@njit(**PAR)
def qconv_panels_par(dot, xp, ow, sh, sw, dh, kh, panels, ksteps, koffs, ep, rowsum, zero, qmin, qmax,
                     out2d, parts):
    count = panels.shape[0]
    for p in prange(parts):
        j0, j1 = _part(count, parts, p)
        qconv_panels(dot, xp, ow, sh, sw, dh, kh, panels, ksteps, koffs, ep, rowsum, zero, qmin, qmax,
                     out2d, j0, j1)


@njit(**PAR)
def window_sums_par(xp, ow, sh, sw, dh, kh, kwc, out, parts):
    lines = out.shape[0] // ow
    for p in prange(parts):
        r0, r1 = _part(lines, parts, p)
        window_sums(xp, ow, sh, sw, dh, kh, kwc, out, r0, r1)


# ---- the other int8 loops --------------------------------------------------------

@njit(**OPTS)
def lookup_cols(x, table, out, col, r0, r1):
    """out[r, col + j] = table[x[r, j]] for rows r0:r1: a uint8 input rescaled into its
    columns of a concat's output (table: the 256-entry requantization, identity for a copy)."""
    w = x.shape[1]
    for r in range(r0, r1):
        xr = x[r]
        orow = out[r]
        for j in range(w):
            orow[col + j] = table[xr[j]]


@njit(**PAR)
def lookup_cols_par(x, table, out, col, parts):
    rows = x.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        lookup_cols(x, table, out, col, r0, r1)


@njit(**OPTS)
def _requant(t, mult, left, shift, zero, qmin, qmax):
    """mace/ir/quant_params.requantize on one int64 accumulator."""
    t = min(max(t, -2147483648), 2147483647)
    t = ((t << left) * mult + (np.int64(1) << (shift - 1))) >> shift
    return min(max(t + zero, qmin), qmax)


@njit(**OPTS)
def qdepthwise(x, zx, w, bias, mult, left, shift, zero, qmin, qmax, sh, sw, dh, dw, pt, pl, cm, out, r0, r1):
    """out[n, y, x, o] = requantize(bias[o] + sum_ij (x[.., o // cm] - zx) * w[i, j, o]) per
    channel o, taps outside the input skipped (a centred pad is 0), output rows r0:r1 (image-
    major). w int64 [kh, kw, O]: the centred filter; bias, mult, left, shift int64 [O].
    The general form, in int64: qdepthwise32 runs where int32 accumulators are exact."""
    n, oh, ow, o = out.shape
    h, wd = x.shape[1], x.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    acc = np.empty((ow, o), np.int64)
    for row in range(r0, r1):
        b, oy = row // oh, row % oh
        iy0 = oy * sh - pt
        orow = out[b, oy]
        for ox in range(ow):
            for ch in range(o):
                acc[ox, ch] = bias[ch]
        for i in range(kh):
            iy = iy0 + i * dh
            if iy < 0 or iy >= h:
                continue
            xrow = x[b, iy]
            for j in range(kw):
                off = j * dw - pl
                x0 = max(0, (-off + sw - 1) // sw)
                x1 = min(ow, (wd - off + sw - 1) // sw)
                wt = w[i, j]
                for ox in range(x0, x1):
                    xs = xrow[ox * sw + off]
                    a = acc[ox]
                    for ci in range(xs.shape[0]):   # input channel ci feeds outputs ci * cm ...
                        xv = np.int64(xs[ci]) - zx
                        for m in range(ci * cm, (ci + 1) * cm):
                            a[m] += xv * wt[m]
        for ox in range(ow):
            for ch in range(o):
                orow[ox, ch] = _requant(acc[ox, ch], mult[ch], left[ch], shift[ch], zero, qmin, qmax)


@njit(**OPTS)
def _mac(acc, xv, z, wv):
    """np.int32(acc + (xv - z) * wv): numba types int32 arithmetic as int64, and LLVM narrows
    the chain back to int32 lanes only where each step is truncated."""
    return np.int32(acc + np.int32(np.int32(np.int32(xv) - z) * wv))


@njit(**OPTS)
def _mac0(acc, xv, wv):
    """np.int32(acc + xv * wv), narrowed to int32 lanes as _mac."""
    return np.int32(acc + np.int32(np.int32(xv) * wv))


@njit(**OPTS)
def _sum9(p0, p1, p2, ch, d1, d2, w9, fold):
    """One channel of a 3x3 depthwise interior pixel: fold + the nine products of the raw
    codes (rows p0, p1, p2 from the window's first column, taps d1 / d2 elements apart)."""
    v = _mac0(fold, p0[ch], w9[0, ch])
    v = _mac0(v, p0[ch + d1], w9[1, ch])
    v = _mac0(v, p0[ch + d2], w9[2, ch])
    v = _mac0(v, p1[ch], w9[3, ch])
    v = _mac0(v, p1[ch + d1], w9[4, ch])
    v = _mac0(v, p1[ch + d2], w9[5, ch])
    v = _mac0(v, p2[ch], w9[6, ch])
    v = _mac0(v, p2[ch + d1], w9[7, ch])
    return _mac0(v, p2[ch + d2], w9[8, ch])


@njit(**OPTS)
def _requant32(v, mult, rnd, shift, zero, qmin, qmax):
    """requantize for an int32 v without a left shift: mult (int32) and v sign-extended, so
    LLVM multiplies 32 x 32 -> 64 (vpmuldq); the result clamped in int64 lanes."""
    t = ((np.int64(v) * np.int64(mult) + rnd) >> shift) + zero
    t = t if t > qmin else qmin
    return t if t < qmax else qmax


def _vload(builder, addr, vec):
    """A vector load from an int64 address (no alignment assumed)."""
    return builder.load(builder.inttoptr(addr, vec.as_pointer()), align=1)


def _splat16(builder, x):
    """An int64 scalar in all 16 lanes."""
    return _splat(builder, x, ir.VectorType(ir.IntType(64), 16))


def _requant16_values(builder, acc, mult, rnd, shift, zero, lo, hi):
    """_requant32 of 16 int32 lanes `acc`, as 16 x i64 within [lo, hi]: mult the int32
    multipliers sign-extended to 16 x i64, rnd and shift 16 x i64, zero / lo / hi splats."""
    v64 = ir.VectorType(ir.IntType(64), 16)
    t = builder.ashr(builder.add(builder.mul(builder.sext(acc, v64), mult), rnd), shift)
    t = builder.add(t, zero)
    t = builder.select(builder.icmp_signed("<", t, lo), lo, t)
    return builder.select(builder.icmp_signed(">", t, hi), hi, t)


def _requant16_ir(builder, acc, mult, rnd, shift, zero, lo, hi, out_):
    """Store _requant16_values as bytes at address out_."""
    v8 = ir.VectorType(ir.IntType(8), 16)
    t = _requant16_values(builder, acc, mult, rnd, shift, zero, lo, hi)
    builder.store(builder.trunc(t, v8), builder.inttoptr(out_, v8.as_pointer()), align=1)


@intrinsic
def _requant16(typingctx, acc, mult, rnd, shift, out, zero, qmin, qmax):
    """16 channels of _requant32 in explicit 16-lane vectors (addresses of acc int32, mult
    int32, rnd int64, shift int64, out uint8): LLVM keeps numba's own loops at 256-bit
    vectors on AVX-512 hosts, 4 int64 lanes for this 32 x 32 -> 64 multiply; written out
    here it takes 512-bit registers where the host has them (the depthwise requantization
    ~2x faster) and is split by LLVM where it has not."""
    i64 = types.int64
    sig = types.void(i64, i64, i64, i64, i64, i64, i64, i64)

    def codegen(context, builder, signature, args):
        acc_, mult_, rnd_, shift_, out_, zero_, qmin_, qmax_ = args
        v32, v64 = ir.VectorType(ir.IntType(32), 16), ir.VectorType(ir.IntType(64), 16)
        _requant16_ir(builder, _vload(builder, acc_, v32), builder.sext(_vload(builder, mult_, v32), v64),
                      _vload(builder, rnd_, v64), _vload(builder, shift_, v64),
                      *(_splat16(builder, x) for x in (zero_, qmin_, qmax_)), out_)
        return context.get_dummy_value()
    return sig, codegen


def _dw3x3_ir(builder, npix, args):
    """npix output pixels x 16 channels of qdepthwise32's 3x3 interior, sums and
    requantization in explicit 16-lane vectors; see _dw3x3."""
    (p0_, p1_, p2_, d1_, d2_, step_, w_, wrow_, fold_, mult_, rnd_, shift_, out_, ostep_,
     zero_, qmin_, qmax_) = args
    i8, i16, i32, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
    v8, v16, v32, v64 = (ir.VectorType(t, 16) for t in (i8, i16, i32, i64))

    def at(base, *offsets):
        for off in offsets:
            base = builder.add(base, off)
        return base
    taps = [builder.sext(_vload(builder, at(w_, builder.mul(wrow_, ir.Constant(i64, t))), v16), v32)
            for t in range(9)]
    fold = _vload(builder, fold_, v32)
    mult = builder.sext(_vload(builder, mult_, v32), v64)
    rnd, shift = _vload(builder, rnd_, v64), _vload(builder, shift_, v64)
    zero, lo, hi = (_splat16(builder, x) for x in (zero_, qmin_, qmax_))
    for k in range(npix):
        shift_k = builder.mul(step_, ir.Constant(i64, k))
        acc = fold
        for r, row in enumerate((p0_, p1_, p2_)):
            for j, d in enumerate((None, d1_, d2_)):
                addr = at(row, shift_k) if d is None else at(row, shift_k, d)
                acc = builder.add(acc, builder.mul(builder.zext(_vload(builder, addr, v8), v32), taps[3 * r + j]))
        _requant16_ir(builder, acc, mult, rnd, shift, zero, lo, hi, at(out_, builder.mul(ostep_, ir.Constant(i64, k))))


@intrinsic(prefer_literal=True)
def _dw3x3(typingctx, npix, p0, p1, p2, d1, d2, step, w, wrow, fold, mult, rnd, shift, out, ostep,
           zero, qmin, qmax):
    """16 channels of npix (literal) 3x3 depthwise interior pixels, `step` bytes apart in the
    input rows p0, p1, p2 (addresses of the first pixel's window, taps d1 / d2 bytes along)
    and `ostep` in out: fold + the nine products of the raw codes in int32 lanes (the taps
    int16 [9, ...] at w, `wrow` bytes apart), requantized as _requant32, stored as bytes.
    Addresses and byte counts as int64; fold, mult int32 and rnd, shift int64 at the block's
    first channel. LLVM keeps numba's own loops at 256-bit vectors on AVX-512 hosts; written
    out, the 16 lanes take 512-bit registers where the host has them (vpmaddwd for the
    products: both factors fit 16 bits) and the sums never leave them before the store."""
    if not isinstance(npix, types.IntegerLiteral):
        return None
    count = npix.literal_value
    i64 = types.int64
    sig = types.void(npix, *([i64] * 17))

    def codegen(context, builder, signature, args):
        _dw3x3_ir(builder, count, args[1:])
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def _dw3x3_row(x0r, x1r, x2r, orow, c0, c1, sw, pl, o, d1, d2, w9, fold, mult, rnd, shift, zero, qmin, qmax):
    """Output pixels c0:c1 of a row (o >= 16 channels) through _dw3x3, from input rows x0r, x1r,
    x2r: 16-channel blocks, the last one ending at o (overlapping its neighbour: the same
    bytes written twice), two pixels per call (the nine taps loaded once for both)."""
    step = max(sw, 0) * o
    px0, px1, px2, po = x0r.ctypes.data, x1r.ctypes.data, x2r.ctypes.data, orow.ctypes.data
    pw, pf, pm, pr, ps = w9.ctypes.data, fold.ctypes.data, mult.ctypes.data, rnd.ctypes.data, shift.ctypes.data
    blocks = (o + 15) // 16
    ox = c0
    while ox < c1:
        at = max((ox * sw - pl) * o, 0)
        two = ox + 1 < c1
        for block in range(blocks):
            cb = min(16 * block, o - 16)
            a0, a1, a2, out = px0 + at + cb, px1 + at + cb, px2 + at + cb, po + ox * o + cb
            if two:
                _dw3x3(2, a0, a1, a2, d1, d2, step, pw + 2 * cb, 2 * o, pf + 4 * cb, pm + 4 * cb, pr + 8 * cb,
                       ps + 8 * cb, out, o, zero, qmin, qmax)
            else:
                _dw3x3(1, a0, a1, a2, d1, d2, step, pw + 2 * cb, 2 * o, pf + 4 * cb, pm + 4 * cb, pr + 8 * cb,
                       ps + 8 * cb, out, o, zero, qmin, qmax)
        ox += 2 if two else 1


# the depthwise quads' layout per 64-channel block (bytes): three groups of tap quads (taps
# 0-3, 4-7, 8) x 4 vectors x 64, then fold and mult int32 [4, 16], rnd and shift int64 [4, 16]
QUAD_TAPS, QUAD_FOLD, QUAD_MULT, QUAD_RND, QUAD_SHIFT, QUAD_BYTES = 0, 768, 1024, 1280, 1792, 2304


def _unpack_lanes(builder, a, b, high):
    """x86 unpack low/high (vpunpckl/h): within each 128-bit lane, a's and b's elements of
    the lane's low (or high) half interleaved."""
    n = a.type.count
    per_lane, half = n // 4, n // 8
    mask = []
    for lane in range(4):
        base = lane * per_lane + (half if high else 0)
        for i in range(half):
            mask += [base + i, n + base + i]
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(ir.IntType(32), n), mask))


def _quads(builder, x0, x1, x2, x3):
    """Four 64-byte tap vectors (64 channels each) as four <16 x i32> whose lane 4L + j holds
    the four taps' bytes of channel 16L + 4r + j (vector r): two levels of lane-wise unpacks."""
    i16 = ir.VectorType(ir.IntType(16), 32)
    v32 = ir.VectorType(ir.IntType(32), 16)
    lo01, hi01 = _unpack_lanes(builder, x0, x1, False), _unpack_lanes(builder, x0, x1, True)
    lo23, hi23 = _unpack_lanes(builder, x2, x3, False), _unpack_lanes(builder, x2, x3, True)
    w = [builder.bitcast(v, i16) for v in (lo01, hi01, lo23, hi23)]
    return [builder.bitcast(_unpack_lanes(builder, w[a], w[b], high), v32)
            for a, b, high in ((0, 2, False), (0, 2, True), (1, 3, False), (1, 3, True))]


def _dw3x3q_ir(builder, tap_addrs, block_, out_, zero_, qmin_, qmax_):
    """64 channels of one 3x3 depthwise pixel with vpdpbusd from its nine taps' addresses
    (64 bytes each): the codes regrouped by lane-wise unpacks into quads (four taps of a
    channel per int32 lane), three vpdpbusd against the int8 taps packed the same way at
    load (`block_`: the address of the block's QUAD_BYTES, see depthwise_conv2d.py), + fold,
    requantized as _requant32, and packed back into channel order by packssdw / packuswb
    (the unpacks' inverse; the values are within 0..255, so the saturating packs are exact)."""
    i8, i32, i64_ = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    v8, v32, v64 = ir.VectorType(i8, 64), ir.VectorType(i32, 16), ir.VectorType(i64_, 16)

    def at(base, off):
        return builder.add(base, ir.Constant(i64_, off))
    taps = [_vload(builder, addr, v8) for addr in tap_addrs]
    zero8 = ir.Constant(v8, None)
    groups = [_quads(builder, *taps[0:4]), _quads(builder, *taps[4:8]), _quads(builder, taps[8], zero8, zero8, zero8)]
    zero, lo, hi = (_splat16(builder, x) for x in (zero_, qmin_, qmax_))
    res = []
    for r in range(4):
        acc = _vload(builder, at(block_, QUAD_FOLD + 64 * r), v32)
        for g in range(3):
            acc = _dpbusd(builder, acc, groups[g][r], _vload(builder, at(block_, QUAD_TAPS + 256 * g + 64 * r), v32),
                          VNNI)
        mult = builder.sext(_vload(builder, at(block_, QUAD_MULT + 64 * r), v32), v64)
        rnd, shift = _vload(builder, at(block_, QUAD_RND + 128 * r), v64), _vload(builder, at(block_, QUAD_SHIFT + 128 * r), v64)
        res.append(builder.trunc(_requant16_values(builder, acc, mult, rnd, shift, zero, lo, hi), v32))
    words = [_pack(builder, res[0], res[1], True), _pack(builder, res[2], res[3], True)]
    builder.store(_pack(builder, *words, False), builder.inttoptr(out_, v8.as_pointer()), align=1)


@intrinsic
def _dw3x3q(typingctx, p0, p1, p2, d1, d2, block, out, zero, qmin, qmax):
    """_dw3x3q_ir for an interior pixel: p0, p1, p2 the addresses of the window's first
    column in its three rows, taps d1 / d2 bytes along."""
    i64 = types.int64
    sig = types.void(*([i64] * 10))

    def codegen(context, builder, signature, args):
        p0_, p1_, p2_, d1_, d2_, block_, out_, zero_, qmin_, qmax_ = args
        addrs = [a for row in (p0_, p1_, p2_) for a in (row, builder.add(row, d1_), builder.add(row, d2_))]
        _dw3x3q_ir(builder, addrs, block_, out_, zero_, qmin_, qmax_)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _dw3x3q9(typingctx, t0, t1, t2, t3, t4, t5, t6, t7, t8, block, out, zero, qmin, qmax):
    """_dw3x3q_ir from nine tap addresses: a border pixel, its taps outside the input
    pointing at a row of zero-point bytes (fold's zero-point share then cancels them: the
    reference's centred 0)."""
    i64 = types.int64
    sig = types.void(*([i64] * 14))

    def codegen(context, builder, signature, args):
        _dw3x3q_ir(builder, list(args[:9]), *args[9:])
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def _dw3x3q_border(x, b, iy0, dh, dw, sw, pl, ox0, ox1, o, quads, starts, pad, taps, out_row, zero, qmin, qmax):
    """Output pixels ox0:ox1 of a row (o >= 64 channels, its window top at input row iy0 of
    image b) through _dw3x3q9, one call per 64-channel block; taps outside the input read
    `pad` (64 zero-point bytes). taps: int64 [9] scratch."""
    h, wd = x.shape[1], x.shape[2]
    px, pp, pq, po = x.ctypes.data, pad.ctypes.data, quads.ctypes.data, out_row.ctypes.data
    for ox in range(ox0, ox1):
        for i in range(3):
            iy = iy0 + i * dh
            for j in range(3):
                ix = ox * sw - pl + j * dw
                inside = iy >= 0 and iy < h and ix >= 0 and ix < wd
                taps[3 * i + j] = px + ((b * h + iy) * wd + ix) * o if inside else -1
        for block in range(starts.shape[0]):
            cb = starts[block]
            _dw3x3q9(_tap(taps, 0, cb, pp), _tap(taps, 1, cb, pp), _tap(taps, 2, cb, pp), _tap(taps, 3, cb, pp),
                     _tap(taps, 4, cb, pp), _tap(taps, 5, cb, pp), _tap(taps, 6, cb, pp), _tap(taps, 7, cb, pp),
                     _tap(taps, 8, cb, pp), pq + block * QUAD_BYTES, po + ox * o + cb, zero, qmin, qmax)


@njit(**OPTS)
def _tap(taps, k, cb, pad):
    """Tap k's address in the block at channel cb, or the zero-point row's."""
    return taps[k] + cb if taps[k] >= 0 else pad


@njit(**OPTS)
def _dw3x3q_row(x0r, x1r, x2r, orow, c0, c1, sw, pl, o, d1, d2, quads, starts, w9, fold, mult, rnd, shift,
                zero, qmin, qmax):
    """Output pixels c0:c1 of a row through _dw3x3q: one call per 64-channel block (blocks
    start at `starts`, the last one ending at o), or, for 16 or 32 channels at stride 1, one
    call per 64 / o pixels (their taps and outputs are contiguous: the block's 64 "channels"
    are the pixels' channels in turn), the rest through _dw3x3_row."""
    px0, px1, px2, po, pq = x0r.ctypes.data, x1r.ctypes.data, x2r.ctypes.data, orow.ctypes.data, quads.ctypes.data
    if o >= 64:
        for ox in range(c0, c1):
            at = max((ox * sw - pl) * o, 0)
            for block in range(starts.shape[0]):
                cb = starts[block]
                _dw3x3q(px0 + at + cb, px1 + at + cb, px2 + at + cb, d1, d2, pq + block * QUAD_BYTES,
                        po + ox * o + cb, zero, qmin, qmax)
        return
    per = 64 // o   # 2 or 4: quad_blocks packs them only for 32 or 16 channels
    ox = c0
    while ox + per <= c1:
        at = max((ox - pl) * o, 0)
        _dw3x3q(px0 + at, px1 + at, px2 + at, d1, d2, pq, po + ox * o, zero, qmin, qmax)
        ox += per
    if ox < c1:
        _dw3x3_row(x0r, x1r, x2r, orow, ox, c1, sw, pl, o, d1, d2, w9, fold, mult, rnd, shift, zero, qmin, qmax)


@njit(**OPTS)
def _requant_row(a, mult, rnd, shift, zero, qmin, qmax, res):
    """res[ch] = _requant32(a[ch], ...) for one pixel's channels: blocks of 16, the last one
    ending at the last channel (overlapping: the same bytes twice); under 16, one by one."""
    o = res.shape[0]
    if o < 16:
        for ch in range(o):
            res[ch] = _requant32(a[ch], mult[ch], rnd[ch], shift[ch], zero, qmin, qmax)
        return
    pa, pm, pr, ps, po = a.ctypes.data, mult.ctypes.data, rnd.ctypes.data, shift.ctypes.data, res.ctypes.data
    for block in range((o + 15) // 16):
        c = min(16 * block, o - 16)
        _requant16(pa + 4 * c, pm + 4 * c, pr + 8 * c, ps + 8 * c, po + c, zero, qmin, qmax)


@njit(**OPTS)
def qdepthwise32(x, zx, w, bias, fold, mult, shift, rnd, quads, starts, zero, qmin, qmax, sh, sw, dh, dw, pt, pl,
                 out, r0, r1):
    """qdepthwise for a channel multiplier of 1 where the sums provably fit int32 (|bias| +
    2 * kh * kw * 255 * 255 < 2^31: the reference's int32 clip is then a no-op) and no
    multiplier needs the left shift: w int16 [kh, kw, O], bias int32 [O], fold = bias - zx *
    (sum of the taps) int32 [O], mult int32 [O], rnd = 2^(shift - 1) int64 [O]. Integers
    throughout, the reference's expression: the same bytes.

    A 3x3 filter's interior pixels are nine products of the raw codes in int32 lanes plus
    fold (the zero point's share taken off once), requantized and stored at once: with 64
    channels or more (16 or 32 at stride 1) and int8 taps, 64 at a time by vpdpbusd on
    regrouped taps (_dw3x3q; `quads`/`starts` from depthwise_conv2d.quad_blocks, empty
    otherwise; 1.3-1.6x _dw3x3), else 16 at a time in explicit vectors (_dw3x3: 1.3-2x the loop over channels below,
    which LLVM vectorizes at half the width), or, under 16 channels, that loop. The other
    pixels: with the 64-channel quads, the quads again from nine tap addresses, those
    outside the input pointing at zero-point bytes (_dw3x3q_border: 1.2-1.6x a layer at
    7x7 to 28x28, where a quarter to half of the pixels touch the border); else tap by tap
    into a row of int32 accumulators, then requantized. The slices keep every index
    provably non-negative (no wraparound checks)."""
    n, oh, ow, o = out.shape
    h, wd = x.shape[1], x.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    xf = x.reshape(n, h, wd * o)
    of = out.reshape(n, oh, ow * o)
    w9 = w.reshape(kh * kw, o)
    acc = np.empty(ow * o, np.int32)
    z = np.int32(zx)
    # output columns whose three taps along W are all inside the input
    a0 = max(0, (pl + sw - 1) // sw)
    a1 = min(ow, (wd - 2 * dw + pl + sw - 1) // sw)
    # 64 channels or more with the quads: the border pixels take them too (9 tap addresses)
    quad9 = kh == 3 and kw == 3 and starts.shape[0] > 0 and o >= 64
    pad = np.full(64 if quad9 else 0, zx, np.uint8)
    taps = np.empty(9 if quad9 else 0, np.int64)
    for row in range(r0, r1):
        b, oy = row // oh, row % oh
        iy0 = oy * sh - pt
        orow = of[b, oy]
        c0, c1 = 0, 0
        if kh == 3 and kw == 3 and iy0 >= 0 and iy0 + 2 * dh < h and a1 > a0:
            c0, c1 = a0, a1
            x0r, x1r, x2r = xf[b, iy0], xf[b, iy0 + dh], xf[b, iy0 + 2 * dh]
            d1, d2 = max(dw, 0) * o, max(2 * dw, 0) * o
            if starts.shape[0] > 0:
                _dw3x3q_row(x0r, x1r, x2r, orow, c0, c1, sw, pl, o, d1, d2, quads, starts, w9, fold, mult, rnd,
                            shift, zero, qmin, qmax)
            elif o >= 16:
                _dw3x3_row(x0r, x1r, x2r, orow, c0, c1, sw, pl, o, d1, d2, w9, fold, mult, rnd, shift,
                           zero, qmin, qmax)
            else:   # a few channels: int32 sums over the channels, requantized with the rest below
                for ox in range(c0, c1):
                    at = max((ox * sw - pl) * o, 0)
                    p0, p1, p2 = x0r[at:at + 2 * dw * o + o], x1r[at:at + 2 * dw * o + o], x2r[at:at + 2 * dw * o + o]
                    a = acc[ox * o:(ox + 1) * o]
                    for ch in range(o):
                        a[ch] = _sum9(p0, p1, p2, ch, d1, d2, w9, fold[ch])
        if quad9:   # the other pixels: columns [0, c0) and [c1, ow)
            _dw3x3q_border(x, b, iy0, dh, dw, sw, pl, 0, c0, o, quads, starts, pad, taps, orow, zero, qmin, qmax)
            _dw3x3q_border(x, b, iy0, dh, dw, sw, pl, c1, ow, o, quads, starts, pad, taps, orow, zero, qmin, qmax)
            continue
        for seg in range(2):   # the other pixels: columns [0, c0) and [c1, ow)
            s0, s1 = (0, c0) if seg == 0 else (c1, ow)
            if s1 <= s0:
                continue
            for ox in range(s0, s1):
                a = acc[ox * o:(ox + 1) * o]
                for ch in range(o):
                    a[ch] = bias[ch]
            for i in range(kh):
                iy = iy0 + i * dh
                if iy < 0 or iy >= h:
                    continue
                xrow = xf[b, iy]
                for j in range(kw):
                    off = j * dw - pl
                    x0 = max(s0, (-off + sw - 1) // sw)
                    x1 = min(s1, (wd - off + sw - 1) // sw)
                    wt = w[i, j]
                    for ox in range(x0, x1):
                        at = max((ox * sw + off) * o, 0)
                        xs = xrow[at:at + o]
                        a = acc[ox * o:(ox + 1) * o]
                        for ch in range(o):
                            a[ch] = _mac(a[ch], xs[ch], z, wt[ch])
        # the row requantized in a loop of its own: fused into the sums' loop, its int64
        # lanes set the vector width of the int32 products too (half as many per step)
        for ox in range(ow):   # with 16 channels or more the interior [c0, c1) is stored already
            if o < 16 or ox < c0 or ox >= c1:
                _requant_row(acc[ox * o:(ox + 1) * o], mult, rnd, shift, zero, qmin, qmax,
                             orow[ox * o:(ox + 1) * o])


@njit(**PAR)
def qdepthwise_par(x, zx, w, bias, mult, left, shift, zero, qmin, qmax, sh, sw, dh, dw, pt, pl, cm, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        qdepthwise(x, zx, w, bias, mult, left, shift, zero, qmin, qmax, sh, sw, dh, dw, pt, pl, cm, out, r0, r1)


@njit(**PAR)
def qdepthwise32_par(x, zx, w, bias, fold, mult, shift, rnd, quads, starts, zero, qmin, qmax, sh, sw, dh, dw, pt,
                     pl, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        qdepthwise32(x, zx, w, bias, fold, mult, shift, rnd, quads, starts, zero, qmin, qmax, sh, sw, dh, dw, pt,
                     pl, out, r0, r1)


@njit(**OPTS)
def qavgpool(x, zx, kh, kw, sh, sw, dh, dw, pt, pl, mult, left, shift, zero, out, r0, r1):
    """uint8 AVG pooling, output rows r0:r1 (image-major), taps outside the input skipped:
    sum(x - zx) requantized per output position by mult/left/shift [oh, ow]. The sums in
    int32 lanes (a window of up to 2^23 taps cannot leave int32) and, as multipliers under
    2^31 need no left shift, requantized by a 32 x 32 -> 64-bit multiply (_requant32):
    2-3x the int64 form, which stays for a multiplier >= 2^30 (left > 0)."""
    n, oh, ow, c = out.shape
    h, wd = x.shape[1], x.shape[2]
    acc = np.empty((ow, c), np.int32)
    z = np.int32(zx)
    for row in range(r0, r1):
        b, oy = row // oh, row % oh
        for ox in range(ow):
            for ch in range(c):
                acc[ox, ch] = 0
        for i in range(kh):
            iy = oy * sh - pt + i * dh
            if iy < 0 or iy >= h:
                continue
            xrow = x[b, iy]
            for j in range(kw):
                off = j * dw - pl
                x0 = max(0, (-off + sw - 1) // sw)
                x1 = min(ow, (wd - off + sw - 1) // sw)
                for ox in range(x0, x1):
                    xs = xrow[ox * sw + off]
                    a = acc[ox]
                    for ch in range(c):
                        a[ch] += np.int32(xs[ch]) - z
        orow = out[b, oy]
        for ox in range(ow):
            m, sl, sr = mult[oy, ox], left[oy, ox], shift[oy, ox]
            a, o = acc[ox], orow[ox]
            if sl == 0:
                m32, rnd = np.int32(m), np.int64(1) << (sr - 1)
                for ch in range(c):
                    o[ch] = _requant32(a[ch], m32, rnd, sr, zero, 0, 255)
            else:
                for ch in range(c):
                    o[ch] = _requant(np.int64(a[ch]), m, sl, sr, zero, 0, 255)


@njit(**PAR)
def qavgpool_par(x, zx, kh, kw, sh, sw, dh, dw, pt, pl, mult, left, shift, zero, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        qavgpool(x, zx, kh, kw, sh, sw, dh, dw, pt, pl, mult, left, shift, zero, out, r0, r1)


@intrinsic
def _umax32(typingctx, dst, src):
    """dst[:32] = max(dst[:32], src[:32]) at int64 addresses: one 32-byte load pair,
    vpmaxub, one store."""
    sig = types.void(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        vec = ir.VectorType(ir.IntType(8), 32)
        d, v = _vload(builder, args[0], vec), _vload(builder, args[1], vec)
        builder.store(builder.select(builder.icmp_unsigned(">", d, v), d, v),
                      builder.inttoptr(args[0], vec.as_pointer()), align=1)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _umax_taps(typingctx, dst, src, offs, ntaps, c):
    """dst[:c] = max over t < ntaps of src + offs[t] [:c] (int64 addresses, offs an int64
    address of byte offsets): 32 channels at a time in a register, the last 32 masked
    (AVX-512BW's byte-masked loads and store); every byte of dst written once."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils
        dst_, src_, offs_, ntaps_, c_ = args
        i1, i8, i32, i64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
        vec, mvec = ir.VectorType(i8, 32), ir.VectorType(i1, 32)
        vptr = vec.as_pointer()
        mload = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vptr, i32, mvec, vec]),
                                               "llvm.masked.load.v32i8.p0v32i8")
        mstore = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [vec, vptr, i32, mvec]),
                                                "llvm.masked.store.v32i8.p0v32i8")
        zero, align = ir.Constant(vec, None), ir.Constant(i32, 1)
        offs = builder.inttoptr(offs_, i64.as_pointer())
        entry = builder.block
        chunk, taps, chunk_end, done = (builder.append_basic_block(n) for n in ("chunk", "taps", "chunk_end", "done"))
        builder.cbranch(builder.icmp_signed(">", c_, ir.Constant(i64, 0)), chunk, done)
        # for ch in range(0, c, 32): lanes ch + l < c
        builder.position_at_end(chunk)
        ch = builder.phi(i64)
        # lanes ch + l < c as 32 bits: (1 << (c - ch)) - 1, all ones from 32 channels left
        left = builder.trunc(builder.sub(c_, ch), i32)
        bits = builder.select(builder.icmp_signed(">=", left, ir.Constant(i32, 32)), ir.Constant(i32, -1),
                              builder.sub(builder.shl(ir.Constant(i32, 1), left), ir.Constant(i32, 1)))
        mask = builder.bitcast(bits, mvec)
        builder.branch(taps)
        # for t in range(ntaps): acc = max(acc, src + offs[t] + ch)
        builder.position_at_end(taps)
        t = builder.phi(i64)
        acc = builder.phi(vec)
        addr = builder.add(builder.add(src_, builder.load(builder.gep(offs, [t]))), ch)
        v = builder.call(mload, [builder.inttoptr(addr, vptr), align, mask, zero])
        new = builder.select(builder.icmp_unsigned(">", acc, v), acc, v)
        t_next = builder.add(t, ir.Constant(i64, 1))
        builder.cbranch(builder.icmp_signed("<", t_next, ntaps_), taps, chunk_end)
        t.add_incoming(ir.Constant(i64, 0), chunk)
        t.add_incoming(t_next, taps)
        acc.add_incoming(zero, chunk)
        acc.add_incoming(new, taps)
        builder.position_at_end(chunk_end)
        builder.call(mstore, [new, builder.inttoptr(builder.add(dst_, ch), vptr), align, mask])
        ch_next = builder.add(ch, ir.Constant(i64, 32))
        builder.cbranch(builder.icmp_signed("<", ch_next, c_), chunk, done)
        ch.add_incoming(ir.Constant(i64, 0), entry)
        ch.add_incoming(ch_next, chunk_end)
        builder.position_at_end(done)
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def _qmaxpool_pixels(x, kh, kw, sh, sw, dh, dw, pt, pl, out, r0, r1):
    """qmaxpool's pixel-major form: per output pixel the offsets of its taps inside the
    input (rows and columns outside skipped), then _umax_taps over them."""
    n, oh, ow, c = out.shape
    h, wd = x.shape[1], x.shape[2]
    px, po = x.ctypes.data, out.ctypes.data
    # per output column: the byte offsets of its valid kernel columns
    cols = np.empty((ow, kw), np.int64)
    ncols = np.zeros(ow, np.int64)
    for ox in range(ow):
        for j in range(kw):
            ix = ox * sw - pl + j * dw
            if 0 <= ix < wd:
                cols[ox, ncols[ox]] = ix * c
                ncols[ox] += 1
    rows = np.empty(kh, np.int64)
    offs = np.empty(kh * kw, np.int64)
    window = np.empty(kh * kw, np.int64)   # a whole window's taps from its top-left one
    for i in range(kh):
        for j in range(kw):
            window[i * kw + j] = (i * dh * wd + j * dw) * c
    for row in range(r0, r1):
        b, oy = row // oh, row % oh
        nrows = 0
        for i in range(kh):
            iy = oy * sh - pt + i * dh
            if 0 <= iy < h:
                rows[nrows] = (b * h + iy) * wd * c
                nrows += 1
        obase = po + (b * oh + oy) * ow * c
        for ox in range(ow):
            if nrows == kh and ncols[ox] == kw:
                _umax_taps(obase + ox * c, px + rows[0] + cols[ox, 0], window.ctypes.data, kh * kw, c)
                continue
            nt = 0
            for i in range(nrows):
                for j in range(ncols[ox]):
                    offs[nt] = rows[i] + cols[ox, j]
                    nt += 1
            if nt == 0:
                for ch in range(c):
                    out[b, oy, ox, ch] = 0
            else:
                _umax_taps(obase + ox * c, px, offs.ctypes.data, nt, c)


@njit(**OPTS)
def _qmaxpool_taps(x, kh, kw, sh, sw, dh, dw, pt, pl, out, r0, r1):
    """qmaxpool's tap-major form: each tap's row maxed into the output row. Channels in
    multiples of 32 go 32 at a time through _umax32 (64 channels ~1.8x LLVM's own loop);
    others through that loop (a ragged rest as overlapping 16-byte blocks or masked 32-byte
    steps was 1.2-1.5x slower: a store that the next tap's load reads only in part is not
    forwarded)."""
    n, oh, ow, c = out.shape
    h, wd = x.shape[1], x.shape[2]
    px, po = x.ctypes.data, out.ctypes.data
    full = c // 32
    blocks = c % 32 == 0
    for row in range(r0, r1):
        b, oy = row // oh, row % oh
        orow = out[b, oy]
        obase = po + (b * oh + oy) * ow * c
        for ox in range(ow):
            for ch in range(c):
                orow[ox, ch] = 0
        for i in range(kh):
            iy = oy * sh - pt + i * dh
            if iy < 0 or iy >= h:
                continue
            xrow = x[b, iy]
            rbase = px + (b * h + iy) * wd * c
            for j in range(kw):
                off = j * dw - pl
                x0 = max(0, (-off + sw - 1) // sw)
                x1 = min(ow, (wd - off + sw - 1) // sw)
                if not blocks:
                    for ox in range(x0, x1):
                        xs = xrow[ox * sw + off]
                        a = orow[ox]
                        for ch in range(c):
                            a[ch] = max(a[ch], xs[ch])
                    continue
                for ox in range(x0, x1):
                    src, dst = rbase + (ox * sw + off) * c, obase + ox * c
                    for k in range(full):
                        _umax32(dst + 32 * k, src + 32 * k)


@njit(**OPTS)
def qmaxpool(x, kh, kw, sh, sw, dh, dw, pt, pl, table, identity, out, r0, r1):
    """uint8 MAX pooling, output rows r0:r1 (image-major): the largest code per channel,
    taps outside the input skipped (the reference's pads hold code 0, the lowest); then
    `table` unless `identity` (the output's parameters are the input's: the usual case).
    With AVX-512BW pixel by pixel in registers (_qmaxpool_pixels: 16-40 channels 2.2-3x
    the tap-major loop, 64-96 1.25-1.4x, 256 level), else tap by tap (_qmaxpool_taps)."""
    if BW:
        _qmaxpool_pixels(x, kh, kw, sh, sw, dh, dw, pt, pl, out, r0, r1)
    else:
        _qmaxpool_taps(x, kh, kw, sh, sw, dh, dw, pt, pl, out, r0, r1)
    if not identity:
        oh, ow, c = out.shape[1], out.shape[2], out.shape[3]
        for row in range(r0, r1):
            orow = out[row // oh, row % oh]
            for ox in range(ow):
                for ch in range(c):
                    orow[ox, ch] = table[orow[ox, ch]]


@njit(**PAR)
def qmaxpool_par(x, kh, kw, sh, sw, dh, dw, pt, pl, table, identity, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        qmaxpool(x, kh, kw, sh, sw, dh, dw, pt, pl, table, identity, out, r0, r1)


@njit(**OPTS)
def qresize_bilinear(x, zx, r_lo, r_hi, r_wlo, r_whi, c_lo, c_hi, c_wlo, c_whi, mult, left, shift,
                     zero, out, r0, r1):
    """uint8 bilinear resize, NHWC, output rows r0:r1 (image-major): each output row blends
    two input rows (centred codes x 10-bit weights), then each pixel two of those columns,
    and requantizes (mace/ops/int8/resize.py, the same integers)."""
    n, oh, ow, c = out.shape
    w = x.shape[2]
    row = np.empty((w, c), np.int64)
    for rr in range(r0, r1):
        b, oy = rr // oh, rr % oh
        top, bot = x[b, r_lo[oy]], x[b, r_hi[oy]]
        wt, wb = r_wlo[oy], r_whi[oy]
        for ix in range(w):
            for ch in range(c):
                row[ix, ch] = (np.int64(top[ix, ch]) - zx) * wt + (np.int64(bot[ix, ch]) - zx) * wb
        orow = out[b, oy]
        for ox in range(ow):
            a, bb = row[c_lo[ox]], row[c_hi[ox]]
            wl, wh = c_wlo[ox], c_whi[ox]
            for ch in range(c):
                orow[ox, ch] = _requant(a[ch] * wl + bb[ch] * wh, mult, left, shift, zero, 0, 255)


@njit(**PAR)
def qresize_bilinear_par(x, zx, r_lo, r_hi, r_wlo, r_whi, c_lo, c_hi, c_wlo, c_whi, mult, left, shift,
                         zero, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        qresize_bilinear(x, zx, r_lo, r_hi, r_wlo, r_whi, c_lo, c_hi, c_wlo, c_whi, mult, left, shift,
                         zero, out, r0, r1)


@intrinsic
def _lut64(typingctx, px, ptable, pout):
    """64 bytes at px -> pout through the 256-byte table at ptable (px may be pout). With AVX-512
    VBMI two vpermi2b (each a 128-entry lookup on the index's low 7 bits, from two of the
    table's four 64-byte quarters) and a select on the index's top bit; elsewhere 64 scalar
    loads in plain IR. A table lookup either way: the same bytes."""
    i64 = types.int64
    sig = types.void(i64, i64, i64)

    def codegen(context, builder, signature, args):
        px_, pt_, po_ = args
        i8, i32 = ir.IntType(8), ir.IntType(32)
        v8 = ir.VectorType(i8, 64)
        idx = _vload(builder, px_, v8)
        if VBMI:
            quarters = [_vload(builder, builder.add(pt_, ir.Constant(pt_.type, 64 * q)), v8) for q in range(4)]
            low = _x86(builder, "llvm.x86.avx512.vpermi2var.qi.512", v8, quarters[0], idx, quarters[1])
            high = _x86(builder, "llvm.x86.avx512.vpermi2var.qi.512", v8, quarters[2], idx, quarters[3])
            r = builder.select(builder.icmp_unsigned(">", idx, ir.Constant(v8, [127] * 64)), high, low)
        else:
            table = builder.inttoptr(pt_, i8.as_pointer())
            r = ir.Constant(v8, ir.Undefined)
            for i in range(64):
                code = builder.zext(builder.extract_element(idx, ir.Constant(i32, i)), ir.IntType(64))
                r = builder.insert_element(r, builder.load(builder.gep(table, [code])), ir.Constant(i32, i))
        builder.store(r, builder.inttoptr(po_, v8.as_pointer()), align=1)
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def lookup(x, table, out, r0, r1):
    """Flat uint8 x -> out[r0:r1] = table[x]: a uint8 -> uint8 op as its 256-entry table (256
    bytes, C-contiguous); x may be out itself (a conv's fused table activation applied in
    place). 64 bytes per _lut64 (vpermi2b where the CPU has AVX-512 VBMI: 0.4 -> ~0.03 ns per
    byte), the rest one by one."""
    x, out = x[r0:r1], out[r0:r1]   # sliced first: no wraparound checks (see lookup2)
    n = out.shape[0]
    k = 0
    if VBMI and n >= 64 and table.shape[0] == 256:
        px, pt, po = x.ctypes.data, table.ctypes.data, out.ctypes.data
        while k + 64 <= n:
            _lut64(px + k, pt, po + k)
            k += 64
    for j in range(k, n):
        out[j] = table[x[j]]


@njit(**OPTS)
def lookup_channels(x, tables, out, r0, r1):
    """uint8 x [rows, C] -> out[r] = tables[c, x[r, c]] for rows r0:r1: a per-channel
    uint8 -> uint8 op (quantized BatchNorm) as one 256-entry table per channel."""
    c = x.shape[1]
    for r in range(r0, r1):
        xr, orow = x[r], out[r]
        for ch in range(c):
            orow[ch] = tables[ch, xr[ch]]


@njit(**PAR)
def lookup_par(x, table, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        lookup(x, table, out, r0, r1)


@njit(**PAR)
def lookup_channels_par(x, tables, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        lookup_channels(x, tables, out, r0, r1)


# add2's split: 30-bit multipliers as two 15-bit halves (each half a vpmaddwd factor)
HALF_BITS = 15


@intrinsic
def _add64(typingctx, pa, pb, pout, coef_hi, coef_lo, c_hi, c_lo, s, zero, qmin, qmax):
    """64 elements of add2 at addresses pa, pb -> pout: the bytes zero-extended to int16 by
    lane-wise unpacks and paired (a, b); two vpmaddwd, against the multipliers' high and low
    15-bit halves (`coef_*`: A's half in the low and B's in the high 16 bits of an int32),
    each + its half of c; then hi + (lo >> 15), >> s (floor((X 2^15 + Y) / 2^S) = floor((X +
    floor(Y / 2^15)) / 2^(S-15)): exact, and every step inside int32); packed back into order
    by the unpacks' inverse, saturating packssdw and packuswb around + zero (a saturating
    int16 add): each saturation is monotone and lands outside 0..255 only where the clamp
    would, so the bytes are clamp(zero + ((A a + B b + c) >> S)) exactly; then [qmin, qmax]."""
    i64 = types.int64
    sig = types.void(*([i64] * 12))

    def codegen(context, builder, signature, args):
        pa_, pb_, po_, chi_, clo_, c_hi_, c_lo_, s_, zero_, qmin_, qmax_ = args
        i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
        v8, v16, v32 = ir.VectorType(i8, 64), ir.VectorType(i16, 32), ir.VectorType(i32, 16)

        def splat(x, vec):
            return _splat(builder, x, vec)
        a, b, z8 = _vload(builder, pa_, v8), _vload(builder, pb_, v8), ir.Constant(v8, None)
        coef_hi, coef_lo = (builder.bitcast(splat(x, v32), v16) for x in (chi_, clo_))
        c_hi, c_lo, s = splat(c_hi_, v32), splat(c_lo_, v32), splat(s_, v32)
        half = ir.Constant(v32, [HALF_BITS] * 16)
        zero, lo, hi = splat(zero_, v16), splat(qmin_, v8), splat(qmax_, v8)
        words = []
        for high in (False, True):
            a16, b16 = (builder.bitcast(_unpack_lanes(builder, v, z8, high), v16) for v in (a, b))
            dwords = []
            for h in (False, True):
                pairs = _unpack_lanes(builder, a16, b16, h)
                top = builder.add(_pmaddwd(builder, pairs, coef_hi), c_hi)
                low = builder.add(_pmaddwd(builder, pairs, coef_lo), c_lo)
                dwords.append(builder.ashr(builder.add(top, builder.ashr(low, half)), s))
            words.append(_x86(builder, "llvm.sadd.sat.v32i16", v16, _pack(builder, *dwords, True), zero))
        r = _pack(builder, *words, False)
        r = builder.select(builder.icmp_unsigned("<", r, lo), lo, r)
        r = builder.select(builder.icmp_unsigned(">", r, hi), hi, r)
        builder.store(r, builder.inttoptr(po_, v8.as_pointer()), align=1)
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def _pair16(x, y):
    """An int32 holding x in its low and y in its high 16 bits (vpmaddwd's factor pair)."""
    return (x & 0xFFFF) | ((y & 0xFFFF) << 16)


@njit(**OPTS)
def add2(a, b, ca, cb, c, s, zero, qmin, qmax, out, r0, r1):
    """Flat uint8 a, b -> out[r0:r1] = clamp(zero + ((ca * a + cb * b + c) >> s), qmin, qmax):
    the int8 Eltwise SUM / SUB / MEAN of two inputs (mace/ops/int8/eltwise.py; |ca|, |cb| <
    2**30, 15 <= s <= 46), 64 elements per _add64 (3.8x the pair table's lookups), the rest
    one by one."""
    mask = (1 << HALF_BITS) - 1
    coef_hi = _pair16(ca >> HALF_BITS, cb >> HALF_BITS)
    coef_lo = _pair16(ca & mask, cb & mask)
    pa, pb, po = a.ctypes.data, b.ctypes.data, out.ctypes.data
    k = r0
    while k + 64 <= r1:
        _add64(pa + k, pb + k, po + k, coef_hi, coef_lo, c >> HALF_BITS, c & mask, s - HALF_BITS, zero,
               qmin, qmax)
        k += 64
    for j in range(k, r1):
        v = ((ca * np.int64(a[j]) + cb * np.int64(b[j]) + c) >> s) + zero
        out[j] = min(max(v, qmin), qmax)


@njit(**PAR)
def add2_par(a, b, ca, cb, c, s, zero, qmin, qmax, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        add2(a, b, ca, cb, c, s, zero, qmin, qmax, out, r0, r1)


@njit(**OPTS)
def lookup2(a, b, table, out, r0, r1):
    """Flat uint8 a, b -> out[r0:r1] = table[a * 256 + b]: a binary uint8 op (the int8 Eltwise)
    as its 65536-entry table, one load per element where the arithmetic (two term tables,
    an int64 requantization) did not vectorize. Sliced first, as binary_clip: indices from
    range(n) need no wraparound check, and the loop becomes vector gathers (2.3-2.6x)."""
    a, b, out = a[r0:r1], b[r0:r1], out[r0:r1]
    for k in range(out.shape[0]):
        out[k] = table[(np.intp(a[k]) << 8) | np.intp(b[k])]


@njit(**PAR)
def lookup2_par(a, b, table, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        lookup2(a, b, table, out, r0, r1)


@intrinsic
def _round_i32(typingctx, x):
    """Round half to even of a double inside int32's range, to int32: x + 1.5 * 2^52 puts the
    integer in the mantissa's low 32 bits (the addition's own rounding, half to even, is the
    rounding), read back by a bitcast. An fadd without fast-math flags, so LLVM never folds
    it, and it vectorizes (np.rint does not, in numba: the Quantize edge took 3 ns/element)."""
    sig = types.int32(types.float64)

    def codegen(context, builder, signature, args):
        magic = ir.Constant(ir.DoubleType(), 6755399441055744.0)
        t = builder.fadd(args[0], magic)
        return builder.trunc(builder.bitcast(t, ir.IntType(64)), ir.IntType(32))
    return sig, codegen


@njit(**OPTS)
def quantize(x, inv_scale, zero, out, r0, r1):
    """Flat float32 x -> out[r0:r1] = clamp(rint(x * inv_scale) + zero, 0, 255) in float64, as
    the Quantize reference computes it (round half to even; clamped to int32 first, the
    rounding's domain, which changes no byte)."""
    xs, os = x[r0:r1], out[r0:r1]
    z = np.int32(zero)
    for k in range(xs.shape[0]):
        v = min(max(np.float64(xs[k]) * inv_scale, -2147483648.0), 2147483647.0)
        q = _round_i32(v) + z
        q = q if q > 0 else 0
        os[k] = np.uint8(q if q < 255 else 255)


@njit(**PAR)
def quantize_par(x, inv_scale, zero, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        quantize(x, inv_scale, zero, out, r0, r1)


@njit(**OPTS)
def dequantize(q, scale, zero, out, r0, r1):
    """Flat uint8 q -> out[r0:r1] = float32((q - zero) * scale), the product in float64 as
    numpy's int32 x float32 promotion computes it."""
    q, out = q[r0:r1], out[r0:r1]   # sliced first: no wraparound checks (see lookup2)
    for k in range(out.shape[0]):
        out[k] = np.float32(np.float64(np.int64(q[k]) - zero) * scale)


@njit(**PAR)
def dequantize_par(q, scale, zero, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        dequantize(q, scale, zero, out, r0, r1)


@njit(**OPTS)
def qmean_pixels(x, zx, mult, left, shift, zero, out):
    """out[n, c] = requantize(sum over pixels of x[n, :, c] - zx): the int8 Reduce MEAN over H
    and W (global average pooling) of x [N, H * W, C], one pass over the pixels."""
    n, pixels, c = x.shape
    acc = np.empty(c, np.int64)
    for b in range(n):
        for ch in range(c):
            acc[ch] = 0
        for q in range(pixels):
            xr = x[b, q]
            for ch in range(c):
                acc[ch] += np.int64(xr[ch]) - zx
        for ch in range(c):
            out[b, ch] = _requant(acc[ch], mult, left, shift, zero, 0, 255)


@njit(**OPTS)
def qsoftmax(x, table, prob_bits, mult, shift, zero, out, r0, r1):
    """Rows r0:r1 of x [rows, n] (uint8): the int8 Softmax reference's integers
    (mace/ops/int8/softmax.py): e = table[max - q], p = ((e << prob_bits) + total / 2) //
    total (half up: every operand is non-negative), requantized to out's codes."""
    n = x.shape[1]
    e = np.empty(n, np.int64)
    for r in range(r0, r1):
        xr, orow = x[r], out[r]
        top = 0
        for k in range(n):
            top = max(top, np.int64(xr[k]))
        total = np.int64(0)
        for k in range(n):
            e[k] = table[top - np.int64(xr[k])]
            total += e[k]
        half = total >> 1
        for k in range(n):
            p = ((e[k] << prob_bits) + half) // total
            orow[k] = _requant(p, mult, 0, shift, zero, 0, 255)


@njit(**PAR)
def qsoftmax_par(x, table, prob_bits, mult, shift, zero, out, parts):
    rows = out.shape[0]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        qsoftmax(x, table, prob_bits, mult, shift, zero, out, r0, r1)
