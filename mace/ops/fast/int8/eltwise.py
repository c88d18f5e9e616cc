"""Eltwise of two uint8 inputs of the output's shape (or broadcasting to it), fast int8, the same bytes as the reference
(mace/ops/int8/eltwise.py) by construction:

* SUM / SUB / MEAN: the reference's one integer expression, A a + B b + c with 30-bit
  A, B, shifted and clamped, 64 elements at a time in explicit vectors (_qloops.add2: two
  vpmaddwd per 16 (a, b) pairs, one per 15-bit half of the multipliers; 3.8x the table
  lookup below, about our float add).
* every other kind (PROD, MIN, MAX), and sums whose output step is 2^15 times finer than
  an input's (the multipliers' halves would not fit): a function of two bytes, tabulated
  once at load -- the reference kernel itself run on all 65536 pairs -- then one compiled
  lookup per element (_qloops.lookup2).
Both split across the compute pool. An input smaller than the output that broadcasts to it
(an SE block's per-channel scale [1, 1, 1, C] against [1, H, W, C], a scalar [1, 1, 1, 1]) is
first expanded into scratch (one strided copy, a few us), then the same loop runs: the same
bytes as the reference's numpy broadcasting; a constant operand is expanded once, at load.
More than two inputs stay with the reference kernel.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import carve, scratch_size
from mace.ops.fast._checks import not_uint8
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qjit import no_loops_or, qloops
from mace.ops.int8.eltwise import ADDITIVE, COEF_LIMIT, EltwiseInt8
from mace.ops.registry import kernel

U8 = np.dtype(np.uint8)


def broadcasts(shape, out) -> bool:
    """Whether `shape` broadcasts to exactly `out` (numpy's rule: right-aligned, 1 or equal)."""
    shape, out = tuple(shape), tuple(out)
    if len(shape) > len(out):
        return False
    return all(s in (1, o) for s, o in zip(shape[::-1], out[::-1]))


def pair_table(run) -> np.ndarray:
    """table[a * 256 + b] = run([a], [b]) over all pairs of uint8 codes (run writes a uint8 out)."""
    codes = np.arange(256, dtype=np.uint8)
    a, b = np.repeat(codes, 256), np.tile(codes, 256)
    table = np.empty(a.size, np.uint8)
    run([a, b], [table])
    return table


@kernel("Eltwise", "int8:fast")
class EltwiseInt8Fast(EltwiseInt8):
    @staticmethod
    def check(ctx) -> str | None:
        out = tuple(ctx.output_shapes[0])
        reason = no_loops_or(EltwiseInt8.check, ctx)
        if reason:
            return reason
        if len(ctx.input_shapes) != 2 or not all(broadcasts(s, out) for s in ctx.input_shapes):
            return ("inputs " + " and ".join(str(list(s)) for s in ctx.input_shapes)
                    + f" for output {list(out)} (two that broadcast to the output's shape only)")
        return not_uint8(ctx, range(len(ctx.input_dtypes)), range(len(ctx.output_dtypes)))

    def setup(self, ctx):
        super().setup(ctx)
        out = tuple(ctx.output_shapes[0])
        # a constant operand: its codes expanded to the output's shape once, here; other inputs
        # that broadcast to the output: expanded into scratch before the loop
        consts = list(ctx.consts) + [None] * (len(ctx.input_shapes) - len(ctx.consts))
        self.held = [None if c is None else np.ascontiguousarray(np.broadcast_to(np.asarray(c, np.uint8), out))
                     for c in consts]
        self.expand = [tuple(s) != out and h is None for s, h in zip(ctx.input_shapes, self.held)]
        self.specs = [(out, U8) for e in self.expand if e]
        self.scratch_nbytes = scratch_size(self.specs)
        # add2 shifts its high halves by S - HALF_BITS: an output step 2^15 times finer
        # than an input's (S under 15) takes the table
        self.sum = (self.kind in ADDITIVE and all(abs(a) < COEF_LIMIT for a in self.coefs)
                    and self.shift >= qloops().HALF_BITS)
        if self.sum:   # add2's arguments: A, B, c (the zero points and the rounding folded in)
            (ca, cb), (za, zb) = self.coefs, self.zeros
            c = (1 << (self.shift - 1)) - ca * za - cb * zb
            self.terms = (ca, cb, c, self.shift, self.zero_out, self.qmin, self.qmax)
        else:   # tabulated over both operands (a constant's precomputed terms set aside)
            fixed, self.fixed = getattr(self, "fixed", None), None
            if fixed is not None:
                self.fixed = [None] * len(fixed)
            self.table = pair_table(lambda inputs, outputs: EltwiseInt8.run(self, inputs, outputs))
            self.fixed = fixed

    def bind(self, inputs, outputs, scratch=None):
        loop = compute_of(self.ctx).loop   # the engine's threads
        if not all(t.flags.c_contiguous for t in (inputs[0], inputs[1], outputs[0])):
            return lambda: EltwiseInt8.run(self, inputs, outputs)
        steps, operands, buffers = [], [], iter(carve(scratch, self.specs))
        for x, expand, held in zip(inputs, self.expand, self.held):
            if held is not None:
                x = held
            elif expand:
                full = next(buffers)
                steps.append(partial(np.copyto, full, np.broadcast_to(x, full.shape)))
                x = full
            operands.append(x.reshape(-1))
        (a, b), out = operands, outputs[0].reshape(-1)
        if self.sum:
            steps.append(loop("add2", (a, b, *self.terms, out), out.size, 3 * out.size, lib=qloops()))
        else:
            steps.append(loop("lookup2", (a, b, self.table, out), out.size, 3 * out.size, lib=qloops()))
        return sequence(steps)

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
