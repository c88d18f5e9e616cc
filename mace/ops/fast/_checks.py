"""Pieces of the fast kernels' `check(ctx) -> reason | None` (mace/ops/registry.py: None, the
kernel takes the node; else why not, in a few words the vlog and the reports show)."""
from __future__ import annotations

import numpy as np

F32 = np.dtype(np.float32)
NO_LOOPS = "no compiled loops (numba missing or MACE_NO_JIT)"


def not_float32(ctx, inputs=(0,), outputs=(0,)) -> str | None:
    """Why the named inputs / outputs are not all float32, or None."""
    for i in inputs:
        if np.dtype(ctx.input_dtypes[i]) != F32:
            return f"input {i} is {np.dtype(ctx.input_dtypes[i])}, not float32"
    for i in outputs:
        if np.dtype(ctx.output_dtypes[i]) != F32:
            return f"output {i} is {np.dtype(ctx.output_dtypes[i])}, not float32"
    return None


def first(*checks) -> str | None:
    """The first reason of `checks` (zero-argument callables, asked in order), or None."""
    for check in checks:
        reason = check()
        if reason is not None:
            return reason
    return None


U8 = np.dtype(np.uint8)


def not_uint8(ctx, inputs=(), outputs=(0,)) -> str | None:
    """Why the named inputs / outputs are not all uint8, or None (the fast int8 kernels)."""
    for i in inputs:
        if np.dtype(ctx.input_dtypes[i]) != U8:
            return f"input {i} is {np.dtype(ctx.input_dtypes[i])}, not uint8"
    for i in outputs:
        if np.dtype(ctx.output_dtypes[i]) != U8:
            return f"output {i} is {np.dtype(ctx.output_dtypes[i])}, not uint8"
    return None
