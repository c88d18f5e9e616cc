"""Compiled loops for the fast kernels: mace.ops.fast._loops, through numba when installed.

numpy cannot fuse a multiply-add chain (a 3x3 depthwise conv is 17 full passes
over the tensor) or a bias + clip epilogue; numba compiles such loops once and
caches the machine code under __pycache__ (cache=True), so later processes load
them in ~0.2 s instead of compiling for ~1.5 s. numba is imported on the first
kernel that asks (not with mace), and without it (no wheel for the platform, or
MACE_NO_JIT=1 in the environment) `loops()` is None and each kernel keeps its
numpy path, which stays the tested fallback.
"""
from __future__ import annotations

import functools
import os


@functools.lru_cache(maxsize=None)
def loops():
    """The module of compiled loops, or None when they cannot be had."""
    if os.environ.get("MACE_NO_JIT", "") not in ("", "0"):
        return None
    try:
        from mace.ops.fast import _loops
    except ImportError:   # numba (or its llvmlite) is not installed
        return None
    except Exception:     # e.g. numba cannot place its cache (code run from a zipapp)
        return None
    return _loops
