"""Pieces of the fast kernels' `check(ctx) -> reason | None` (mace/ops/registry.py: None, the
kernel takes the node; else why not, in a few words the vlog and the reports show)."""
from __future__ import annotations

import numpy as np

F32 = np.dtype(np.float32)
U8 = np.dtype(np.uint8)
NO_LOOPS = "no compiled loops (numba missing or MACE_NO_JIT)"


def not_dtype(ctx, dtype, inputs, outputs) -> str | None:
    """Why the named inputs / outputs are not all of `dtype`, or None."""
    for side, indices, dtypes in (("input", inputs, ctx.input_dtypes), ("output", outputs, ctx.output_dtypes)):
        for i in indices:
            if np.dtype(dtypes[i]) != dtype:
                return f"{side} {i} is {np.dtype(dtypes[i])}, not {dtype}"
    return None


def not_float32(ctx, inputs=(0,), outputs=(0,)) -> str | None:
    """The float kernels: input 0 and output 0 by default."""
    return not_dtype(ctx, F32, inputs, outputs)


def not_uint8(ctx, inputs=(), outputs=(0,)) -> str | None:
    """The fast int8 kernels: output 0 by default (their inputs are checked by the reference's own check)."""
    return not_dtype(ctx, U8, inputs, outputs)


def first(*checks) -> str | None:
    """The first reason of `checks` (zero-argument callables, asked in order), or None."""
    for check in checks:
        reason = check()
        if reason is not None:
            return reason
    return None


