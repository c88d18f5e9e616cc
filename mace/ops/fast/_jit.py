"""Compiled loops for the fast kernels: mace.ops.fast._loops, through numba when installed.

numpy cannot fuse a multiply-add chain (a 3x3 depthwise conv is 17 full passes
over the tensor) or a bias + clip epilogue; numba compiles such loops once and
caches the machine code (cache=True: under __pycache__ in a checkout, in the user's cache
folder for an installed wheel, mace/ops/fast/_cache_place.py), so later processes load
them in ~0.2 s instead of compiling for ~1.5 s. numba is imported on the first
kernel that asks (not with mace), and without it (no wheel for the platform, or
MACE_NO_JIT=1 in the environment) `loops()` is None and each kernel keeps its
numpy path, which stays the tested fallback.

Compiling happens once per machine and signature, 1-4 s a loop, and a new model meets loops
and signatures no earlier one used: its first run would look like a hang. The compile listener
(mace/ops/fast/kernel_cache.py, registered here with the loops) makes every compile visible
(a note, or the CLI's progress line), and `converter.py warmup` compiles them all ahead.
"""
from __future__ import annotations

import functools
import importlib
import os


@functools.lru_cache(maxsize=None)
def loops():
    """The module of compiled loops, or None when they cannot be had."""
    if os.environ.get("MACE_NO_JIT", "") not in ("", "0"):
        return None
    try:
        from mace.ops.fast import _cache_place
        _cache_place.install()   # before any loop module: an installed wheel caches in the user's folder
        from mace.ops.fast import _loops
    except ImportError:   # numba (or its llvmlite) is not installed
        return None
    except Exception:     # e.g. numba cannot place its cache (code run from a zipapp)
        return None
    _watched()
    return _loops


@functools.lru_cache(maxsize=None)
def act_loops():
    """The module of compiled activation / unary loops (mace/ops/fast/_act_loops.py), or None
    when they cannot be had (as `loops`)."""
    if loops() is None:
        return None
    try:
        from mace.ops.fast import _act_loops
    except Exception:   # numba cannot build or cache them here: the references run
        return None
    _watched()
    return _act_loops


@functools.lru_cache(maxsize=None)
def op_loops(name: str):
    """An op's own module of compiled loops, mace/ops/fast/<name>.py (_deconv_loops, _rnn_loops:
    a file each, so numba's per-file cache recompiles only that op's loops after an edit), or
    None when they cannot be had (as `loops`)."""
    if loops() is None:
        return None
    try:
        module = importlib.import_module(f"mace.ops.fast.{name}")
    except Exception:   # numba cannot build or cache them here: the references run
        return None
    _watched()
    return module


def _watched() -> None:
    """Compiles from here on reach the compile listener (notes, the CLI's progress line)."""
    from mace.ops.fast._compile_events import listener
    listener()
