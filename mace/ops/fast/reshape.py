"""Reshape, fast CPU kernel: one copy from a reshaped view (the reference goes through SimpleKernel:
compute, asarray, reshape, copy). Arena buffers are contiguous, so the view is free."""
from __future__ import annotations

from functools import partial

import numpy as np

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
        return partial(np.copyto, out, x.reshape(out.shape))
