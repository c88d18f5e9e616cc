"""numba loop behind the fast StreamBuffer (imported only through _jit.op_loops("_stream_loops")).

A streaming buffer's run is three short copies (the kept frames out, the new frames out, the
last frames back into the state): a few hundred floats each on a wake-word stream, where a
numpy call costs more than its copy. One compiled call does the three.
"""
from __future__ import annotations

import numpy as np
from numba import njit

OPTS = dict(cache=True, nogil=True, error_model="numpy")


@njit(**OPTS)
def stream_shift(state, x, out, r0, r1):
    """Rows r0:r1 (the axes before the buffer's axis, flattened): out[r] = state[r] then x[r];
    then state[r] = the last state.shape[1] values of out[r]. Every row flat and contiguous.
    Element loops over unsigned offsets: numba's slice assignment copied these rows one float
    at a time after an overlap check (16 x 64 frames: 0.9 us), and a signed index keeps its
    wraparound check in the loop (_pad_loops.pad_rows says the same)."""
    k, t = np.uint64(state.shape[1]), np.uint64(x.shape[1])
    for r in range(r0, r1):
        s, xr, o = state[r], x[r], out[r]
        for j in range(k):
            o[j] = s[j]
        for j in range(t):
            o[k + j] = xr[j]
        for j in range(k):
            s[j] = o[t + j]
