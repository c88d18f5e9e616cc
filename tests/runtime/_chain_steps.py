"""Compiled steps for tests/runtime/test_chain.py: module-level numba functions, as the fast
kernels' loops are (a chain imports its loops by module and name)."""
import numpy as np
from numba import njit, prange


@njit(nogil=True)
def scaled(x, factor, out):
    """out = x * factor; a negative x[0] is refused (a step that fails inside a chain)."""
    if x[0] < 0:
        raise ValueError("negative first value")
    for i in range(x.shape[0]):
        out[i] = x[i] * factor


@njit(nogil=True)
def mixed(a, b, n, f32, flag, out):
    """Every kind of argument a chain passes: a 2-D read-only array, a strided one, an int, a
    float32, a bool."""
    for i in range(n):
        v = a[i, 0] + b[i]
        out[i] = v * f32 if flag else v


@njit(parallel=True)
def parallel_copy(x, out):
    for i in prange(x.shape[0]):
        out[i] = x[i]


@njit
def total(x):
    """A loop returning a value: a chain calls only loops that return nothing."""
    return x.sum()


def closure():
    @njit
    def inner(x, out):
        out[0] = x[0] + 1
    return inner


from_closure = closure()   # not importable by its own name: called by address all the same


@njit(nogil=True)
def scaled_rows(x, factor, out, r0, r1):
    """Rows r0:r1 of out = x * factor, a negative value refused: a split step's serial loop."""
    for i in range(r0, r1):
        if x[i] < 0:
            raise ValueError("negative value")
        out[i] = x[i] * factor


@njit(nogil=True, parallel=True)
def scaled_rows_par(x, factor, out, parts):
    rows = x.shape[0]
    step = (rows + parts - 1) // parts
    for p in prange(parts):
        scaled_rows(x, factor, out, min(rows, p * step), min(rows, (p + 1) * step))
