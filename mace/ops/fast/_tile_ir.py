"""The register tile's loop nest as LLVM IR, shared by the float packed GEMM's tile
(mace/ops/fast/_loops.py, `_TileIR`), the int8 GEMM's (mace/ops/fast/int8/_qloops.py,
`_qtile_ir`), the recurrent GEMV's (mace/ops/fast/_rnn_loops.py, `_GemvIR`), the tiny
pointwise conv's (mace/ops/fast/_pixel_loops.py, `_RowsIR`) and the 1-D depthwise conv's
(mace/ops/fast/_line_loops.py, `_TapsIR`): a tile's rows
each read K in `nseg` segments; for each segment, counted k loops step every row's
accumulators (one vector per 16 columns), threaded through the blocks as phis, then the tile
stores them. What a step computes (an fma chain, a dot product), how B's row is laid out and
the store are each tile's own.

numba caches a compiled loop under its own file's stamp only, not this file's: after editing
this file, touch those five files too, so that their cached tiles are built again.
"""
from __future__ import annotations

from llvmlite import ir


def splat(builder, x, vec):
    """Scalar x in every lane of `vec` (an integer wider than the lanes truncated first)."""
    if isinstance(x.type, ir.IntType) and x.type.width > vec.element.width:
        x = builder.trunc(x, vec.element)
    undef = ir.Constant(vec, ir.Undefined)
    return builder.shuffle_vector(builder.insert_element(undef, x, ir.Constant(ir.IntType(32), 0)), undef,
                                  ir.Constant(ir.VectorType(ir.IntType(32), vec.count), None))


class TileIR:
    """A tile of `nrows` rows x `vecs` accumulator vectors of type `vec`, built with `builder`."""

    def __init__(self, builder, nrows: int, vecs: int, vec):
        from numba.core import cgutils

        self.b, self.nrows, self.vecs, self.vec = builder, nrows, vecs, vec
        self.i64 = ir.IntType(64)
        self.i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        self._prefetch = cgutils.get_or_insert_function(   # (address, write 0, locality 3, data 1)
            builder.module, ir.FunctionType(ir.VoidType(), [self.i8p, i32, i32, i32]), "llvm.prefetch.p0i8")

    def const(self, v):
        return ir.Constant(self.i64, v)

    def splat(self, x):
        return splat(self.b, x, self.vec)

    def vptr(self, base, off):
        """A pointer to the vector at element `off` of `base`."""
        return self.b.bitcast(self.b.gep(base, [off]), self.vec.as_pointer())

    def prefetch(self, ptr):
        """ptr's cache line into L1 (past the end of B: a no-op)."""
        if ptr.type != self.i8p:
            ptr = self.b.bitcast(ptr, self.i8p)
        self.b.call(self._prefetch, [ptr, *(ir.Constant(ir.IntType(32), x) for x in (0, 3, 1))])

    def phis(self):
        return [[self.b.phi(self.vec) for _ in range(self.vecs)] for _ in range(self.nrows)]

    def incoming(self, phis, values, block):
        for row_phis, row_values in zip(phis, values):
            for phi, value in zip(row_phis, row_values):
                phi.add_incoming(value, block)

    def counted_loop(self, body, after, start, stop, count: int, acc_in, step):
        """From the current block: for k in range(start, stop, count) (stop - start a multiple
        of count, possibly 0): acc = step(acc, k + u) for u < count, in block `body`; leaves
        the builder at the start of `after`, returning the accumulators' phis there."""
        b, const = self.b, self.const
        pred = b.block
        b.cbranch(b.icmp_signed("<", start, stop), body, after)
        b.position_at_end(body)
        k = b.phi(self.i64)
        acc = self.phis()
        new = acc
        for u in range(count):
            new = step(new, b.add(k, const(u)))
        k_next = b.add(k, const(count))
        b.cbranch(b.icmp_signed("<", k_next, stop), body, after)
        k.add_incoming(start, pred)
        k.add_incoming(k_next, body)
        self.incoming(acc, acc_in, pred)
        self.incoming(acc, new, body)
        b.position_at_end(after)
        out = self.phis()
        self.incoming(out, acc_in, pred)
        self.incoming(out, new, body)
        return out

    def segments(self, nseg_, loop_blocks, segment):
        """for s in range(nseg_) (>= 1), from zero accumulators: acc = segment(s, acc, blocks),
        `blocks` being new blocks named `loop_blocks` (for the segment's k loops) and last the
        segment's end, where `segment` leaves the builder. Returns the accumulators after the
        last segment, the builder at the block after the loop."""
        b, const = self.b, self.const
        entry = b.block
        head = b.append_basic_block("segment")
        blocks = [b.append_basic_block(n) for n in (*loop_blocks, "segment_end")]
        done = b.append_basic_block("k_done")
        b.branch(head)
        b.position_at_end(head)
        s = b.phi(self.i64)
        acc_s = self.phis()
        acc_e = segment(s, acc_s, blocks)
        s_next = b.add(s, const(1))
        b.cbranch(b.icmp_signed("<", s_next, nseg_), head, done)
        s.add_incoming(const(0), entry)
        s.add_incoming(s_next, blocks[-1])
        zero = ir.Constant(self.vec, None)
        self.incoming(acc_s, [[zero] * self.vecs] * self.nrows, entry)
        self.incoming(acc_s, acc_e, blocks[-1])
        b.position_at_end(done)
        return acc_e
