"""Compiled loops for the fast kernels: mace.ops.fast._loops, through numba when installed.

numpy cannot fuse a multiply-add chain (a 3x3 depthwise conv is 17 full passes
over the tensor) or a bias + clip epilogue; numba compiles such loops once and
caches the machine code (cache=True: under __pycache__ in a checkout, in the user's cache
folder for an installed wheel, mace/ops/fast/_cache_place.py), so later processes load
them in ~0.2 s instead of compiling for ~1.5 s. numba is imported on the first
kernel that asks (not with mace), and without it (no wheel for the platform, or
MACE_NO_JIT=1 in the environment) `loops()` is None and each kernel keeps its
numpy path, which stays the tested fallback. With MACE_AOT=1 and a library built ahead for this
machine (`converter.py warmup --aot`, mace/ops/fast/_aot.py) the modules come from that library,
without numba in the process.

Compiling happens once per machine and signature, 1-4 s a loop, and a new model meets loops
and signatures no earlier one used: its first run would look like a hang. The compile listener
(mace/ops/fast/kernel_cache.py, registered here with the loops) makes every compile visible
(a note, or the CLI's progress line), and `converter.py warmup` compiles them all ahead.
"""
from __future__ import annotations

import functools
import importlib
import os

from mace.ops.fast import _aot


def _no_jit() -> bool:
    return os.environ.get("MACE_NO_JIT", "") not in ("", "0")


@functools.lru_cache(maxsize=None)
def loops():
    """The module of compiled loops, or None when they cannot be had."""
    return served("mace.ops.fast._loops")


@functools.lru_cache(maxsize=None)
def act_loops():
    """The module of compiled activation / unary loops (mace/ops/fast/_act_loops.py), or None
    when they cannot be had (as `loops`)."""
    return served("mace.ops.fast._act_loops")


@functools.lru_cache(maxsize=None)
def op_loops(name: str):
    """An op's own module of compiled loops, mace/ops/fast/<name>.py (_deconv_loops, _rnn_loops:
    a file each, so numba's per-file cache recompiles only that op's loops after an edit), or
    None when they cannot be had (as `loops`)."""
    return served(f"mace.ops.fast.{name}")


def served(name: str):
    """Loop module `name` as the kernels get it: from the library compiled ahead of time where
    MACE_AOT=1 and one is built for this machine (mace/ops/fast/_aot.py: numba is imported only
    for what it lacks), else numba's module; None when neither can be had."""
    if _no_jit():
        return None
    if _aot.enabled():
        lib = _aot.library()
        if lib is not None:
            return lib.module(name, functools.partial(jitted, name))
    return jitted(name)


def ahead_of_time() -> bool:
    """Whether the loops are served from a library built ahead (MACE_AOT=1 and one is built)."""
    return not _no_jit() and _aot.enabled() and _aot.library() is not None


@functools.lru_cache(maxsize=None)
def jitted(name: str):
    """numba's loop module `name` (compiled or loaded from numba's cache on first call of each
    loop), or None without numba (not installed, MACE_NO_JIT=1, no cache folder to be had)."""
    if _no_jit():
        return None
    try:
        from mace.ops.fast import _cache_place
        _cache_place.install()   # before any loop module: an installed wheel caches in the user's folder
        module = importlib.import_module(name)
    except ImportError:   # numba (or its llvmlite) is not installed
        return None
    except Exception:     # e.g. numba cannot place its cache (code run from a zipapp), or build a loop here
        return None
    _watched()
    return module


def _watched() -> None:
    """Compiles from here on reach the compile listener (notes, the CLI's progress line)."""
    from mace.ops.fast._compile_events import listener
    listener()
