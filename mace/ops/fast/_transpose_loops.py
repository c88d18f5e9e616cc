"""numba loops behind the fast Transpose's general permutations (imported only through
_jit.op_loops("_transpose_loops")).

A BERT's attention heads ([1, S, 12, 32] -> [1, 12, S, 32] and back, 12 a MiniLM run) and a
detector's head outputs (PicoDet's NHWC -> NCHW of 10 or 32 channels, 90 a run) were numpy's
permuted copy: a Python call each (1-3 us for the small ones) and, on two threads, the end of a
parallel chain (mace/ops/fast/chain.py) every time. Here the copy is one compiled loop over the
output in its own order (writes contiguous, reads where the input's strides point), which a
chain calls from compiled code and the compute pool splits by rows. Copies only: the same
bytes as numpy's.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

OPTS = dict(cache=True, nogil=True, error_model="numpy")
PAR = dict(OPTS, parallel=True)


BLOCK = 256   # out's last axis in blocks: an NHWC -> NCHW copy reads 256 pixels' channels at a time


@njit(**OPTS)
def permute4(x, steps, out, r0, r1):
    """out = the input permuted, for out's rows r0:r1 (a row: one (i, j) of its first two axes).
    x: the input, flat and contiguous; steps: int64 element strides in x of out's four axes.
    Where out's last axis is contiguous in x (a head transpose keeps its 32 floats together) each
    row is a contiguous copy; else a strided gather, out's last axis taken BLOCK at a time for
    all the rows, so that the input lines a block reads serve every row before they leave the
    cache (an NHWC -> NCHW of 7600 pixels x 32 channels: 167 -> 60 us). Indices unsigned:
    numba's wraparound check on a signed index kept these short loops scalar."""
    nj, nk, nl = out.shape[1], out.shape[2], out.shape[3]
    o = out.reshape(-1)
    s0, s1, s2, s3 = np.uint64(steps[0]), np.uint64(steps[1]), np.uint64(steps[2]), np.uint64(steps[3])
    u_nk, u_nl = np.uint64(nk), np.uint64(nl)
    block = u_nl if s3 == 1 else np.uint64(BLOCK)
    for m0 in range(np.uint64(0), u_nl, block):
        m1 = min(m0 + block, u_nl)
        for r in range(r0, r1):
            i, j = np.uint64(r // nj), np.uint64(r % nj)
            base = i * s0 + j * s1
            row = np.uint64(r) * u_nk * u_nl
            for k in range(u_nk):
                b, ob = base + k * s2, row + k * u_nl
                if s3 == 1:
                    for m in range(m0, m1):
                        o[ob + m] = x[b + m]
                else:
                    for m in range(m0, m1):
                        o[ob + m] = x[b + m * s3]


@njit(**OPTS)
def _part(rows, parts, p):
    step = (rows + parts - 1) // parts
    return min(p * step, rows), min((p + 1) * step, rows)


@njit(**PAR)
def permute4_par(x, steps, out, parts):
    rows = out.shape[0] * out.shape[1]
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        permute4(x, steps, out, r0, r1)
