"""The compiled int8 loops (mace/ops/fast/int8/_qloops.py), or None where the float fast
kernels' compiled loops are not to be had either (no numba, MACE_NO_JIT=1): the int8
fast kernels then decline and the reference int8 kernels run."""
from __future__ import annotations

import functools

from mace.ops.fast._checks import NO_LOOPS
from mace.ops.fast._jit import served


@functools.lru_cache(maxsize=None)
def qloops():
    """numba loads here, with the first int8 fast kernel (not with mace); or the library built
    ahead (MACE_AOT=1). None also where llvmlite lacks the API the tile is written in."""
    return served("mace.ops.fast.int8._qloops")


def no_loops_or(reference_check, ctx) -> str | None:
    """The start of every fast int8 kernel's check: no compiled int8 loops, or the reason the
    reference kernel it specialises gives, or None."""
    if qloops() is None:
        return NO_LOOPS
    return reference_check(ctx)
