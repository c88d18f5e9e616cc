"""Concat, fast int8: each uint8 input rescaled (its 256-entry table, mace/ops/int8/concat.py)
or, where it has the output's parameters already (the quantize pass gives a Concat's
producers its range: shared_concat_ranges), copied straight into its columns of the output
viewed as [outer rows, inner], by one compiled loop per input, split across the compute pool. numpy's `take` into a strided
slice was most of a quantized SqueezeNet's non-conv time."""
from __future__ import annotations

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._checks import not_uint8
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qjit import no_loops_or, qloops
from mace.ops.int8.concat import ConcatInt8
from mace.ops.registry import kernel

IDENTITY = np.arange(256, dtype=np.uint8)   # a table that changes nothing (pooling uses it too)

@kernel("Concat", "int8:fast")
class ConcatInt8Fast(ConcatInt8):
    @staticmethod
    def check(ctx) -> str | None:
        reason = no_loops_or(ConcatInt8.check, ctx)
        if reason:
            return reason
        if len(ctx.output_shapes[0]) < 1:
            return "scalar output"
        reason = not_uint8(ctx, range(len(ctx.input_dtypes)), range(len(ctx.output_dtypes)))
        if reason:
            return reason
        return None if all(p is not None for p in ctx.input_quant) else "an input has no quantization parameters"

    def bind(self, inputs, outputs, scratch=None):
        loop = compute_of(self.ctx).loop   # the engine's threads
        out = outputs[0]
        rows = int(np.prod(out.shape[:self.axis], dtype=np.int64))
        if out.size == 0 or not all(a.flags.c_contiguous for a in list(inputs) + [out]):
            return lambda: self.run(inputs, outputs)
        out2d = out.reshape(rows, -1)
        steps, col = [], 0
        for x, table in zip(inputs, self.tables):
            width = int(np.prod(x.shape[self.axis:], dtype=np.int64))
            if table is None:   # the output's parameters already (the quantize pass shares them)
                steps.append(loop("copy_cols", (x.reshape(rows, width), out2d, col), rows, 2 * x.size))
            else:
                steps.append(loop("lookup_cols", (x.reshape(rows, width), table, out2d, col), rows,
                                  2 * x.size, lib=qloops()))
            col += width
        return sequence(steps)
