"""Eltwise SUM / SUB / MEAN of two same-shape uint8 inputs, fast int8: the reference's term
tables (mace/ops/int8/eltwise.py) looked up, added and requantized in one compiled pass
(_qloops.qadd) instead of four numpy ones, split across the compute pool. Other kinds,
broadcasting and constant operands stay with the reference kernel."""
from __future__ import annotations

import numpy as np

from mace.ops.fast._pool import loop
from mace.ops.fast.int8._qjit import qloops
from mace.ops.int8.eltwise import ADDITIVE, EltwiseInt8
from mace.ops.registry import kernel


@kernel("Eltwise", "int8:fast")
class EltwiseInt8Fast(EltwiseInt8):
    @staticmethod
    def accepts(ctx) -> bool:
        out = tuple(ctx.output_shapes[0])
        return (qloops() is not None and EltwiseInt8.accepts(ctx) and ctx.arg("type", "") in ADDITIVE
                and len(ctx.input_shapes) == 2 and all(tuple(s) == out for s in ctx.input_shapes)
                and all(c is None for c in ctx.consts)
                and all(np.dtype(d) == np.uint8 for d in list(ctx.input_dtypes) + list(ctx.output_dtypes)))

    def setup(self, ctx):
        super().setup(ctx)
        shift = int(self.shift)
        self.left = max(1 - shift, 0)
        self.right = shift + self.left

    def bind(self, inputs, outputs, scratch=None):
        a, b, out = (t.reshape(-1) for t in (inputs[0], inputs[1], outputs[0]))
        if not all(t.flags.c_contiguous for t in (inputs[0], inputs[1], outputs[0])):
            return lambda: EltwiseInt8.run(self, inputs, outputs)
        args = (a, b, *self.tables, int(self.mult), self.left, self.right, self.zero_out,
                int(self.qmin), int(self.qmax), out)
        return loop("qadd", args, out.size, 3 * out.size, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
