"""numba loops behind the fast Cast and the copies of Split and StridedSlice (imported only
through _jit.op_loops("_cast_loops")).

A model's input Cast (microWakeWord's int8 features to float) or a streaming model's split of
its frames into channel halves is a few hundred elements, where np.copyto's call costs more
than its copy (~0.3-0.5 us); a compiled loop is a step a chain of steps calls from compiled
code (mace/ops/fast/chain.py). `cast_flat` converts only where it is exact or correctly rounded
in both (any number to a float, a bool to anything): np.copyto's bytes; a float to an int (NaN
and out-of-range values differ between the two) stays numpy's. `copy_rows` copies raw bits
(the callers view any dtype as an unsigned int of its size): the same bytes whatever they hold.
"""
from __future__ import annotations

from numba import njit

OPTS = dict(cache=True, nogil=True, error_model="numpy")


@njit(**OPTS)
def cast_flat(x, out):
    """out[i] = x[i] converted to out's type; both flat and the same length."""
    for i in range(x.shape[0]):
        out[i] = x[i]


@njit(**OPTS)
def copy_rows(x, out):
    """out = x for two 2-D arrays of one shape, any strides (a split's piece, a slice)."""
    for r in range(x.shape[0]):
        xr, orow = x[r], out[r]
        for i in range(x.shape[1]):
            orow[i] = xr[i]
