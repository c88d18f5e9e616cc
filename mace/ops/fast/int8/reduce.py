"""Reduce MEAN over H and W of an NHWC uint8 tensor (global average pooling), fast int8: one
compiled pass summing the centred codes per channel in int64 and requantizing them as the
reference does (mace/ops/int8/reduce.py: a float-free numpy sum over a strided axis pair).
Other reductions and axes stay with the reference kernel."""
from __future__ import annotations

from functools import partial

from mace.ops.fast._checks import not_uint8
from mace.ops.fast.int8._qjit import no_loops_or, qloops
from mace.ops.int8.reduce import ReduceInt8
from mace.ops.reduce import reduce_axes
from mace.ops.registry import kernel


@kernel("Reduce", "int8:fast")
class ReduceInt8Fast(ReduceInt8):
    @staticmethod
    def check(ctx) -> str | None:
        shape = ctx.input_shapes[0]
        reason = no_loops_or(ReduceInt8.check, ctx)
        if reason:
            return reason
        if ctx.arg("reduce_type", "") != "MEAN":
            return f"Reduce {ctx.arg('reduce_type', '')} (MEAN only)"
        if len(shape) != 4 or tuple(reduce_axes(ctx.arg, 4)) != (1, 2) or 0 in shape:
            return f"not a mean over the pixels of a 4-D input ({list(shape)})"
        return not_uint8(ctx)

    def setup(self, ctx):
        super().setup(ctx)
        shift = int(self.shift)
        self.left = max(1 - shift, 0)
        self.right = shift + self.left

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        n, h, w, c = x.shape
        if not x.flags.c_contiguous or not out.flags.c_contiguous:
            return partial(ReduceInt8.run, self, inputs, outputs)
        return partial(qloops().qmean_pixels, x.reshape(n, h * w, c), self.zero_in, int(self.mult),
                       self.left, self.right, self.zero_out, out.reshape(n, c))

    def run(self, inputs, outputs):
        self.bind(inputs, outputs)()
