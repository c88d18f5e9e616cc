"""numba loops behind the fast Pad's channel padding (imported only through
_jit.op_loops("_pad_loops")).

TFLite's BlazeFace-family detectors (MediaPipe's face, palm and pose detectors) pad the channels
of an NHWC tensor with zeros before every residual add whose branch widens it (24 -> 28, 32 ->
36, ...). numpy's copyto into out[..., :c] and its fill of out[..., c:] walk 4 or 24 floats per
pixel as their inner loop: 37 us for a 64 x 64 x 24 map (mp_face_detection: 111 us of its ~1 ms
in 11 Pads). One pass per output row here: the row's leading fill, its copy, its trailing fill.
Copies and one value: the same bytes as the reference.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

OPTS = dict(cache=True, nogil=True, error_model="numpy")
PAR = dict(OPTS, parallel=True)


@njit(**OPTS)
def pad_rows(x, out, c, n, begin, value, r0, r1):
    """Rows r0:r1 of out (flat, rows of n) = value, with x's rows (flat, rows of c) at columns
    begin:begin + c. Indexed by unsigned offsets: numba checks a signed index for wraparound,
    which kept these short loops scalar (or, over per-row slices, paid four views a row: a
    64 x 64 x 24 -> 28 pad 39 us, 18 us like this; numpy's copy and fill 28 + more)."""
    u_begin, u_c, u_n = np.uint64(begin), np.uint64(c), np.uint64(n)
    for r in range(r0, r1):
        row, src = np.uint64(r) * u_n, np.uint64(r) * u_c
        for j in range(u_begin):
            out[row + j] = value
        body = row + u_begin
        for j in range(u_c):
            out[body + j] = x[src + j]
        for j in range(u_begin + u_c, u_n):
            out[row + j] = value


@njit(**OPTS)
def _part(rows, parts, p):
    step = (rows + parts - 1) // parts
    return min(rows, p * step), min(rows, (p + 1) * step)


@njit(**PAR)
def pad_rows_par(x, out, c, n, begin, value, parts):
    rows = out.shape[0] // n if n else 0
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        pad_rows(x, out, c, n, begin, value, r0, r1)


@njit(**OPTS)
def pad_image(x, out, h, wc, hp, wpc, top, left, value, r0, r1):
    """Rows r0:r1 of out (flat: images of hp rows of wpc values) = value, with x's rows (flat:
    images of h rows of wc values) at rows top:top + h, columns left:left + wc of each image:
    an NHWC map's spatial padding (a conv's or pool's padded input), one pass per output row
    (numpy's four border fills and interior copy were five calls, each ~0.4 us on a small map,
    and a copy the pool could not split)."""
    u_wc, u_wpc, u_left = np.uint64(wc), np.uint64(wpc), np.uint64(left)
    for r in range(r0, r1):
        image, y = r // hp, r % hp - top
        row = np.uint64(r) * u_wpc
        if y < 0 or y >= h:
            for j in range(u_wpc):
                out[row + j] = value
            continue
        src = np.uint64(image * h + y) * u_wc
        for j in range(u_left):
            out[row + j] = value
        body = row + u_left
        for j in range(u_wc):
            out[body + j] = x[src + j]
        for j in range(u_left + u_wc, u_wpc):
            out[row + j] = value


@njit(**PAR)
def pad_image_par(x, out, h, wc, hp, wpc, top, left, value, parts):
    rows = out.shape[0] // wpc if wpc else 0
    for p in prange(parts):
        r0, r1 = _part(rows, parts, p)
        pad_image(x, out, h, wc, hp, wpc, top, left, value, r0, r1)
