"""Reshape, fast CPU kernel: one copy from a reshaped view (the reference goes through SimpleKernel:
compute, asarray, reshape, copy). Arena buffers are contiguous, so the view is free; the CPU
engine mostly makes the output that view itself (Engine._reshape_views), and then there is no
step at all."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel
from mace.ops.registry import kernel


def same_dtype(ctx) -> str | None:
    """A copy of the bytes: the output's dtype must be the input's."""
    if np.dtype(ctx.input_dtypes[0]) == np.dtype(ctx.output_dtypes[0]):
        return None
    return f"casts {np.dtype(ctx.input_dtypes[0])} to {np.dtype(ctx.output_dtypes[0])}"


@kernel("Reshape", "cpu:fast")
class ReshapeFast(FastKernel):
    check = staticmethod(same_dtype)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if out.size and out.__array_interface__["data"][0] == x.__array_interface__["data"][0] \
                and out.flags.c_contiguous and x.flags.c_contiguous:
            return sequence([])   # the engine made the output a view of the input: no step
        return partial(np.copyto, out, x.reshape(out.shape))
