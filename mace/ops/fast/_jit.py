"""Compiled loops for the fast kernels: mace.ops.fast._loops, through numba when installed.

numpy cannot fuse a multiply-add chain (a 3x3 depthwise conv is 17 full passes
over the tensor) or a bias + clip epilogue; numba compiles such loops once and
caches the machine code under __pycache__ (cache=True), so later processes load
them in ~0.2 s instead of compiling for ~1.5 s. numba is imported on the first
kernel that asks (not with mace), and without it (no wheel for the platform, or
MACE_NO_JIT=1 in the environment) `loops()` is None and each kernel keeps its
numpy path, which stays the tested fallback.

Compiling happens once per machine and source, on the first run, and takes long enough to look
like a hang (the digits example ~4 s; three ONNX ResNet-50 / ShuffleNet / Inception-v2 models ~2
minutes on 2 cores, then ~4 s warm): when numba's cache holds nothing for the loops, a one-line
note (logging, shown by the CLI) says so before the first one compiles.
"""
from __future__ import annotations

import functools
import importlib
import logging
import os

log = logging.getLogger("mace.jit")
COLD_NOTE = ("note: compiling the {what} with numba for this machine (the first run only; a minute or "
             "two for a large model, then they load from numba's cache in {where})")


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
    note_if_cold(_loops, "fast CPU kernels")
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
    note_if_cold(_act_loops, "fast CPU activations")
    return _act_loops


def cold_cache(module) -> str | None:
    """numba's cache folder for `module`'s loops when it holds none of them for the module's
    current source (so each compiles on first use), else None. numba keeps one index file per
    loop, stamped with the source file's time and size; an index it cannot use reads as empty."""
    try:
        files = [d._cache._cache_file for d in vars(module).values()
                 if hasattr(getattr(d, "_cache", None), "_cache_file")]
        if files and not any(f._load_index() for f in files):
            return str(files[0]._cache_path)
    except Exception:   # numba's cache internals differ: better no note than a failed run
        return None
    return None


def note_if_cold(module, what: str) -> None:
    where = cold_cache(module)
    if where:
        log.warning(COLD_NOTE.format(what=what, where=where))


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
    note_if_cold(module, f"fast CPU kernels ({name.strip('_')})")
    return module
