"""cblas_sgemm of the OpenBLAS numpy already loaded, for what np.matmul cannot say.

np.matmul always overwrites its output (OpenBLAS then zeroes C in a pass of its
own before accumulating) and needs each operand as one 2-D array. The GEMM
itself can do more: beta=1 accumulates into C, so a conv's bias can be in C
before the GEMM (no bias pass after it) and a k x k conv can be k*k GEMMs
accumulating over shifted row windows of one padded input (no im2col copy, see
_conv_shifted). This module calls that same library's cblas_sgemm through ctypes
(no C code of ours, and the same thread pool threadpoolctl limits), after a
self-test against np.matmul at load. Where numpy's BLAS is not an OpenBLAS it can
find, or MACE_NO_CBLAS=1 is set, `sgemm()` is None and kernels keep their
np.matmul paths.
"""
from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
# (symbol, integer type): numpy >= 2 wheels ship scipy-openblas64 (64-bit ints, prefixed
# names); numpy 1.2x wheels openblas64_; a system OpenBLAS the plain 32-bit names.
SYMBOLS = (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64),
           ("scipy_cblas_sgemm", ctypes.c_int32), ("cblas_sgemm", ctypes.c_int32))


class Sgemm:
    """C[m, n] = A[m, k] @ B[k, n] + beta * C, row-major, on float32 arrays.

    The leading dimensions passed are the arrays' row strides, so any row window or
    column slice of a float32 array whose rows are evenly spaced and whose elements
    are contiguous is an operand without a copy.
    """

    def __init__(self, fn, int_type):
        self.fn = fn
        self.int_bits = ctypes.sizeof(int_type) * 8
        i = int_type
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i, i, i, ctypes.c_float,
                       ctypes.c_void_p, i, ctypes.c_void_p, i, ctypes.c_float, ctypes.c_void_p, i]
        fn.restype = None

    def call(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float = 0.0):
        """c = a @ b + beta * c now (each 2-D float32 with unit column stride)."""
        self.bound(a, b, c, beta)()

    def bound(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float = 0.0,
              trans_b: bool = False):
        """A zero-argument callable doing c = a @ b + beta * c (b given as [n, k] and
        used transposed when trans_b), addresses resolved now."""
        (m, k), n = a.shape, b.shape[0 if trans_b else 1]
        if c.shape != (m, n) or b.shape != ((n, k) if trans_b else (k, n)):
            raise ValueError(f"sgemm shapes {a.shape} x {b.shape}{'^T' if trans_b else ''} -> {c.shape}")
        args = (ROW_MAJOR, NO_TRANS, TRANS if trans_b else NO_TRANS, m, n, k, 1.0, a.ctypes.data,
                row_stride(a), b.ctypes.data, row_stride(b), beta, c.ctypes.data, row_stride(c))
        fn = self.fn
        keep = (a, b, c)   # the arrays must outlive the callable that holds their addresses

        def run(_keep=keep):
            fn(*args)
        return run


def row_stride(a: np.ndarray) -> int:
    """Row stride in elements of a 2-D float32 operand; ValueError if BLAS cannot take it."""
    if a.ndim != 2 or a.dtype != np.float32 or (a.shape[1] > 1 and a.strides[1] != 4) \
            or a.strides[0] % 4:
        raise ValueError(f"not a BLAS operand: shape {a.shape}, strides {a.strides}, {a.dtype}")
    return max(a.strides[0] // 4, a.shape[1], 1)


def _numpy_openblas_path():
    from threadpoolctl import threadpool_info

    libs = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    numpy_dir = os.path.dirname(os.path.dirname(np.__file__))
    mine = [i for i in libs if os.path.realpath(i["filepath"]).startswith(os.path.realpath(numpy_dir))
            and "numpy" in i["filepath"]]
    return (mine or libs or [{}])[0].get("filepath")


def _self_test(s: Sgemm) -> bool:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    c = np.ones((5, 4), np.float32)
    s.call(a, b, c[:, :3], beta=1.0)
    return np.allclose(c[:, :3], a @ b + 1, atol=1e-5) and np.all(c[:, 3] == 1)


@functools.lru_cache(maxsize=None)
def openblas():
    """numpy's OpenBLAS as a ctypes library, or None."""
    try:
        path = _numpy_openblas_path()
        return ctypes.CDLL(path) if path else None
    except (OSError, ImportError):
        return None


@functools.lru_cache(maxsize=None)
def sgemm():
    """The Sgemm of numpy's OpenBLAS, or None when it cannot be had (or MACE_NO_CBLAS=1)."""
    if os.environ.get("MACE_NO_CBLAS", "") not in ("", "0"):
        return None
    lib = openblas()
    for name, int_type in SYMBOLS if lib is not None else ():
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        s = Sgemm(fn, int_type)
        try:
            if _self_test(s):
                return s
        except Exception:   # a wrong signature guess must never take the process down
            continue
    return None
