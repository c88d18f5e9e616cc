"""StreamBuffer, fast CPU kernel: the buffer's three copies in one compiled call
(_stream_loops.stream_shift) instead of the reference's concatenate and copy."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel
from mace.ops.stream_buffer import shift
from mace.ops.variable import defined_variable


@kernel("StreamBuffer", "cpu:fast")
class StreamBufferFast(FastKernel):
    @staticmethod
    def check(ctx) -> str | None:
        if op_loops("_stream_loops") is None:
            return NO_LOOPS
        return not_float32(ctx, (0, 1), (0,))

    def setup(self, ctx):
        self.store, self.name = defined_variable(ctx)
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.output_shapes[0]))

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        state = self.store.values[self.name]   # the store's own array: reset_state copies into it
        if not all(a.flags.c_contiguous for a in (state, x, out)):   # views would be copies
            return partial(shift, state, x, out, self.axis)
        rows = int(np.prod(out.shape[:self.axis], dtype=np.int64))
        flat = [a.reshape(rows, -1) for a in (state, x, out)]   # contiguous: views
        return compute_of(self.ctx).loop("stream_shift", tuple(flat), rows, 1, parts=1,
                                         lib=op_loops("_stream_loops"))
