"""Buffers that start on a cache line (ALIGN bytes): the weights in a .data file, the
engine's tensor arena and scratch, and the kernels' packed filters all do. numpy itself
promises 16 bytes, and a 64-byte vector load or store at 16 mod 64 touches two lines
(the float GEMM tile ran 1.2-1.3x slower on such panels)."""
from __future__ import annotations

import numpy as np

ALIGN = 64


def aligned_empty(shape, dtype=np.uint8) -> np.ndarray:
    """np.empty whose data starts on an ALIGN-byte boundary."""
    return _aligned(shape, dtype, np.empty)


def aligned_zeros(shape, dtype=np.uint8) -> np.ndarray:
    """np.zeros whose data starts on an ALIGN-byte boundary."""
    return _aligned(shape, dtype, np.zeros)


def aligned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `a` starting on an ALIGN-byte boundary."""
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def _aligned(shape, dtype, alloc) -> np.ndarray:
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = alloc(nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + nbytes].view(dtype).reshape(shape)
