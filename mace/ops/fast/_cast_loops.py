"""numba loop behind the fast Cast (imported only through _jit.op_loops("_cast_loops")).

A model's input Cast (microWakeWord's int8 features to float) is a few hundred elements, where
np.copyto's call costs more than its copy (0.48 us); the compiled loop is a call a chain of
steps makes from compiled code (mace/ops/fast/chain.py). Only conversions that are exact or
correctly rounded in both (any number to a float, a bool to anything): they give np.copyto's
bytes. A float to an int (NaN and out-of-range values differ between the two) stays numpy's.
"""
from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def cast_flat(x, out):
    """out[i] = x[i] converted to out's type; both flat and the same length."""
    for i in range(x.shape[0]):
        out[i] = x[i]
