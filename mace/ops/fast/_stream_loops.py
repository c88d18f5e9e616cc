"""numba loop behind the fast StreamBuffer (imported only through _jit.op_loops("_stream_loops")).

A streaming buffer's run is three short copies (the kept frames out, the new frames out, the
last frames back into the state): a few hundred floats each on a wake-word stream, where a
numpy call costs more than its copy. One compiled call does the three.
"""
from __future__ import annotations

from numba import njit

OPTS = dict(cache=True, nogil=True, error_model="numpy")


@njit(**OPTS)
def stream_shift(state, x, out, r0, r1):
    """Rows r0:r1 (the axes before the buffer's axis, flattened): out[r] = state[r] then x[r];
    then state[r] = the last state.shape[1] values of out[r]. Every row flat and contiguous."""
    k, t = state.shape[1], x.shape[1]
    for r in range(r0, r1):
        out[r, :k] = state[r]
        out[r, k:] = x[r]
        state[r] = out[r, t:]
