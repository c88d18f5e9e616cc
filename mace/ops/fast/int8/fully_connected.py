"""FullyConnected, fast int8: the integer GEMM (_qgemm.QPanels) with one A row per input
row (K bytes), the weight (O, K) packed once; one-row products split by filter panels.
Input rows whose K is not a multiple of 4 are copied into scratch with slack first."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import carve, scratch_size
from mace.ops.fast._checks import not_uint8
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qgemm import MAX_K, SLACK, QPanels, pool_width, table_step
from mace.ops.fast.int8._qjit import no_loops_or, qloops
from mace.ops.fast.int8.conv2d import U8
from mace.ops.int8._gemm import OutputStage
from mace.ops.int8.fully_connected import FullyConnectedInt8
from mace.ops.registry import kernel


@kernel("FullyConnected", "int8:fast")
class FullyConnectedInt8Fast(FullyConnectedInt8):
    @staticmethod
    def check(ctx) -> str | None:
        w = ctx.consts[1] if len(ctx.consts) > 1 else None
        reason = no_loops_or(FullyConnectedInt8.check, ctx)
        if reason:
            return reason
        if w is None:
            return "weight is not constant"
        if w.dtype not in (np.int8, np.uint8) or w.ndim != 2:
            return f"{w.ndim}-D {w.dtype} weight (2-D int8 / uint8 only)"
        if w.shape[1] > MAX_K:
            return f"K = {w.shape[1]} beyond {MAX_K} (int32 sums could overflow)"
        return not_uint8(ctx) or (
            "bias is not constant" if len(ctx.consts) >= 3 and ctx.consts[2] is None else None)

    def setup(self, ctx):
        lib = qloops()
        wq = ctx.consts[1]
        o, k = wq.shape
        self.rows = int(np.prod(ctx.input_shapes[0][:-1], dtype=np.int64))
        self.zero = int(ctx.input_quant[0].zero_point)
        self.stage = stage = OutputStage(ctx, ctx.input_quant[1], o, self.bias_input)
        w_zero = np.asarray(ctx.input_quant[1].zero_point).reshape(-1)
        self.gemm = QPanels(lib, wq.reshape(o, 1, k), w_zero if w_zero.size > 1 else w_zero[0],
                            stage, self.zero, slice(0, o), pool_width(compute_of(ctx)), compute_of(ctx))
        self.packed = self.gemm.panels
        self.copy = k % lib.KB != 0
        self.specs = [((self.rows,), np.int64)] + ([((self.rows * k + SLACK,), U8)] if self.copy else [])
        self.scratch_nbytes = scratch_size(self.specs)
        self.k, self.o = k, o

    def bind(self, inputs, outputs, scratch=None):
        sums, *rest = carve(scratch, self.specs)
        x = inputs[0].reshape(self.rows, self.k)
        steps = []
        if self.copy or not x.flags.c_contiguous:
            xs = rest[0][:self.rows * self.k].reshape(self.rows, self.k) if self.copy else np.empty_like(x)
            steps.append(partial(np.copyto, xs, x))
            x = xs
        # each row a line of one pixel: the pool can split the rows
        steps += self.gemm.conv_steps(x.reshape(self.rows, 1, self.k), 1, (1, 1), 1,
                                      outputs[0].reshape(self.rows, self.o), sums)
        table = table_step(compute_of(self.ctx), qloops(), self.stage, outputs[0])
        return sequence(steps + ([] if table is None else [table]))

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()

