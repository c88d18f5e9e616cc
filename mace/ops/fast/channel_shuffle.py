"""ChannelShuffle, fast CPU kernel: one compiled pass over [pixels, C] (the reference copies
one strided group at a time), split across the compute pool's threads when it pays."""
from __future__ import annotations

import numpy as np

from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS
from mace.ops.fast._jit import loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel


def compiled_numeric(ctx) -> str | None:
    if loops() is None:
        return NO_LOOPS
    if np.dtype(ctx.input_dtypes[0]).kind not in "fiu":
        return f"input is {np.dtype(ctx.input_dtypes[0])} (numbers only)"
    return None if len(ctx.input_shapes[0]) >= 1 else "scalar input"


@kernel("ChannelShuffle", "cpu:fast")
class ChannelShuffleFast(FastKernel):
    check = staticmethod(compiled_numeric)

    def setup(self, ctx):
        self.group = int(ctx.arg("group"))

    def bind(self, inputs, outputs, scratch=None):
        # arena tensors are contiguous: the [pixels, C] reshapes are views the loop writes through
        c = inputs[0].shape[-1]
        x, out = inputs[0].reshape(-1, c), outputs[0].reshape(-1, c)
        return compute_of(self.ctx).loop("channel_shuffle", (x, self.group, out), x.shape[0], 2 * x.size)
