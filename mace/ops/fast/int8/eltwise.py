"""Eltwise of two same-shape uint8 inputs, fast int8: every kind the reference has (SUM, SUB,
MEAN, PROD, MIN, MAX, a fused RELU / RELUX) is a function of two bytes, so it is tabulated
once at load -- the reference kernel (mace/ops/int8/eltwise.py) itself run on all 65536
pairs -- and a run is one compiled lookup per element (_qloops.lookup2), split across the
compute pool. The same bytes as the reference by construction. (The arithmetic form, two
term tables and an int64 requantization per element, ran 30-45x our float add: its table
reads and variable shifts kept LLVM from vectorizing it; written out in explicit 16-lane
vectors it vectorizes, but its six int64 multiplies per 16 elements made it only ~12% faster
than the table: not worth a second path.) Broadcasting, constant operands and more than two
inputs stay with the reference kernel.
"""
from __future__ import annotations

import numpy as np

from mace.ops.fast._pool import loop
from mace.ops.fast.int8._qjit import qloops
from mace.ops.int8.eltwise import EltwiseInt8
from mace.ops.registry import kernel

U8 = np.dtype(np.uint8)


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
    def accepts(ctx) -> bool:
        out = tuple(ctx.output_shapes[0])
        return (qloops() is not None and EltwiseInt8.accepts(ctx)
                and len(ctx.input_shapes) == 2 and all(tuple(s) == out for s in ctx.input_shapes)
                and all(c is None for c in ctx.consts)
                and all(np.dtype(d) == U8 for d in list(ctx.input_dtypes) + list(ctx.output_dtypes)))

    def setup(self, ctx):
        super().setup(ctx)
        self.table = pair_table(lambda inputs, outputs: EltwiseInt8.run(self, inputs, outputs))

    def bind(self, inputs, outputs, scratch=None):
        if not all(t.flags.c_contiguous for t in (inputs[0], inputs[1], outputs[0])):
            return lambda: EltwiseInt8.run(self, inputs, outputs)
        a, b, out = (t.reshape(-1) for t in (inputs[0], inputs[1], outputs[0]))
        return loop("lookup2", (a, b, self.table, out), out.size, 3 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
