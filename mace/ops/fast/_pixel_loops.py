"""numba loop behind tiny pointwise convs (imported only through _jit.op_loops("_pixel_loops")).

A 1x1 conv on a few pixels, or a conv whose one output pixel's window is its whole unpadded
input (a streaming model's conv over its frames), is a product of a few rows by a small
constant weight: microWakeWord's 60 -> 60 convs on one pixel. The direct conv loop
(_loops.conv_direct) accumulated in memory and LLVM's vectorized loop (64 floats a step) never
ran for 60 or 30 filters: the scalar remainder did all of it, ~0.3 us for 3600 multiply-adds.
Here the filters sit padded to a multiple of 16, 16 a vector in registers, and each row's
window is fma chains on them (`_rows`, on the register tile's loop nest of _tile_ir.py): the
window split across `nu` partial sums per vector, so that 8 or more chains are in flight (a
chain waits ~4 cycles on its last fma; four vectors alone used a quarter of the FMA ports),
the partial sums added at the end; then bias and clip. 60 -> 60: ~0.06 us.

numba caches this loop under this file's stamp only: after editing _tile_ir.py, touch this file.
"""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from mace.ops.fast._tile_ir import TileIR

OPTS = dict(cache=True, nogil=True, error_model="numpy")
CHAINS = 8   # fma chains in flight per row: partial sums per vector = CHAINS // vectors


class _RowsIR(TileIR):
    """out[:16 vecs] = h[:n] @ r[:n, :16 vecs] (r's rows ldr floats apart) as `nu` partial sums
    per vector (window elements k with k % nu == u, then the tail into the first), added in
    order at the end and stored."""

    def __init__(self, builder, vecs: int, nu: int):
        from numba.core import cgutils

        f32 = ir.FloatType()
        vec = ir.VectorType(f32, 16)
        self.fptr, self.nu = f32.as_pointer(), nu
        self.fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3),
                                                  "llvm.fma.v16f32")
        super().__init__(builder, nu, vecs, vec)

    def emit(self, h_, n_, r_, ldr_, out_):
        b, const, nu = self.b, self.const, self.nu
        h, r, out = (b.inttoptr(v, self.fptr) for v in (h_, r_, out_))

        def fma_row(acc, k, u):
            row = b.gep(r, [b.mul(k, ldr_)])
            hk = self.splat(b.load(b.gep(h, [k]), align=4))
            acc = [list(a) for a in acc]
            acc[u] = [b.call(self.fma, [hk, b.load(self.vptr(row, const(16 * v)), align=4), acc[u][v]])
                      for v in range(self.vecs)]
            return acc

        turn = iter(range(1 << 30))

        def step(acc, k):   # counted_loop calls it nu times a trip, k, k + 1, ...: partial sum u
            return fma_row(acc, k, next(turn) % nu)

        zero = [[ir.Constant(self.vec, None)] * self.vecs for _ in range(nu)]
        main = b.mul(b.sdiv(n_, const(nu)), const(nu))
        acc = self.counted_loop(b.append_basic_block("k_main"), b.append_basic_block("k_main_done"),
                                const(0), main, nu, zero, step)
        acc = self.counted_loop(b.append_basic_block("k_tail"), b.append_basic_block("k_done"),
                                main, n_, 1, acc, lambda a, k: fma_row(a, k, 0))
        for v in range(self.vecs):
            total = acc[0][v]
            for u in range(1, nu):
                total = b.fadd(total, acc[u][v])
            b.store(total, self.vptr(out, const(16 * v)), align=4)


@intrinsic(prefer_literal=True)
def _rows(typingctx, nv, nu, h, n, r, ldr, out):
    """out[:16 nv] = h[:n] @ r[:n, :16 nv] in nu partial sums (addresses as integers, ldr in
    floats); nv and nu literals."""
    if not (isinstance(nv, types.IntegerLiteral) and isinstance(nu, types.IntegerLiteral)):
        return None
    vecs, parts = nv.literal_value, nu.literal_value
    i64 = types.int64
    sig = types.void(nv, nu, i64, i64, i64, i64, i64)

    def codegen(context, builder, signature, args):
        _RowsIR(builder, vecs, parts).emit(*args[2:])
        return context.get_dummy_value()
    return sig, codegen


@njit(**OPTS)
def pixel_rows(x, wt, bias, lo, hi, acc, out):
    """out[p, :o] = clip(x[p] @ wt[:, :o] + bias[:o], lo, hi) for each row p: x [P, K] rows
    contiguous, wt [K, O16] C-contiguous with O16 a multiple of 16 (columns past o are zero),
    acc O16 floats of scratch, out [P, o]. The bias is added after the window's sum."""
    rows, k = x.shape
    wide, o = wt.shape[1], out.shape[1]
    wp, ap = wt.ctypes.data, acc.ctypes.data
    for p in range(rows):
        xp = x.ctypes.data + p * x.strides[0]
        j = 0
        while j + 128 <= wide:
            _rows(8, 1, xp, k, wp + 4 * j, wide, ap + 4 * j)
            j += 128
        while j + 64 <= wide:
            _rows(4, 2, xp, k, wp + 4 * j, wide, ap + 4 * j)
            j += 64
        while j + 32 <= wide:
            _rows(2, 4, xp, k, wp + 4 * j, wide, ap + 4 * j)
            j += 32
        while j < wide:
            _rows(1, 8, xp, k, wp + 4 * j, wide, ap + 4 * j)
            j += 16
        orow = out[p]
        for q in range(o):   # selects (a NaN passes both, as np.clip's): they vectorize
            v = acc[q] + bias[q]
            v = lo if v < lo else v
            orow[q] = hi if v > hi else v
