"""FakeQuantize, fast CPU kernel: the reference's six numpy passes in one compiled loop
(_loops.fake_quantize; no fastmath there, so x / scale stays a division and the bytes
are the reference's). Every FakeQuantize of a float32 tensor takes it when numba is there."""
from __future__ import annotations

import numpy as np

from mace.ops.fake_quantize import grid
from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel


def _check(ctx) -> str | None:
    return NO_LOOPS if loops() is None else not_float32(ctx, outputs=())


@kernel("FakeQuantize", "cpu:fast")
class FakeQuantizeFast(FastKernel):
    check = staticmethod(_check)

    def setup(self, ctx):
        scale, zero, lo, hi = grid(ctx.op)
        self.args = (np.float32(scale), np.float32(zero), np.float32(lo), np.float32(hi))

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0].reshape(-1), outputs[0].reshape(-1)
        return compute_of(self.ctx).loop("fake_quantize", (x, *self.args, out), out.size, 2 * out.size)
