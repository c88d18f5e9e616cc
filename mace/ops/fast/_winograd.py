"""Winograd F(2x2,3x3) and F(4x4,3x3) convolution (3x3, stride 1, dilation 1, group 1), NHWC.

Per chunk of tile rows: gather the overlapping (m+2)x(m+2) input tiles into
D [a*a, tiles, C] with one strided copy, transform them with one GEMM by
kron(B^T, B^T), multiply per tile position by the pre-transformed filter
U [a*a, C, O] (batched GEMM), transform back with kron(A^T, A^T) and scatter
the m x m output tiles. GEMM work drops 2.25x (m=2) or 4x (m=4); the transforms
are GEMMs with K = a*a on data a few times the size of the input.
F(4x4) loses a little precision (max relative error ~1e-5 against 5e-7 for
im2col on ResNet-sized layers), well inside the CPU validation threshold.
"""
from __future__ import annotations

from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mace.ops.fast._conv_gemm import ConvGeometry, pad_steps
from mace.ops.fast.compute import SERIAL, ComputeContext

# Lavin & Gray's matrices (interpolation points 0, +-1, +-2, inf for m = 4).
B_T = {2: [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
       4: [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
           [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]}
G = {2: [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]],
     4: [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
         [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]}
A_T = {2: [[1, 1, 1, 0], [0, 1, -1, -1]],
       4: [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]}

# Tile rows per chunk: the tile data D of one chunk stays within this many bytes.
CHUNK_BYTES = 4 << 20


# Where Winograd pays, measured per layer on 2 threads (benchmarks/bench_ops.py, AMD EPYC,
# OpenBLAS SkylakeX kernels; ms for im2col / F(2x2) / F(4x4)):
#   56x56x256 10.5 / 6.4 / 4.9    28x28x128 0.69 / 0.53 / 0.53    14x14x256 0.68 / 0.51 / 0.73
#   56x56x64  0.86 / 0.75 / 0.62  13x13x64->256 0.16 / 0.19 / 0.22   55x55x16->64 0.26 / 0.45 / 0.31
# Few input channels make the transforms dominate; few tiles make the a*a GEMMs too small.
MIN_CHANNELS = 64
MIN_TILES = 49                  # output tiles per image, with >= 128 input channels
MIN_TILES_FEW_CHANNELS = 100    # ... with 64..127 input channels


def _tiles(geo: ConvGeometry, m: int) -> int:
    return -(-geo.oh // m) * -(-geo.ow // m)


def eligible(geo: ConvGeometry) -> bool:
    return ((geo.kh, geo.kw) == (3, 3) and tuple(geo.strides) == (1, 1)
            and tuple(geo.dilations) == (1, 1) and geo.group == 1)


def pick_block(geo: ConvGeometry, m: int) -> int:
    """The output block to use when `m` (2 or 4) is asked for: m, 2 instead of a 4 whose tiles
    would be too few, or 0 (im2col) where Winograd does not pay."""
    if m not in (2, 4) or not eligible(geo) or geo.c < MIN_CHANNELS:
        return 0
    need = MIN_TILES if geo.c >= 128 else MIN_TILES_FEW_CHANNELS
    for block in ((4, 2) if m == 4 else (2,)):
        if _tiles(geo, block) >= need:
            return block
    return 0


def transform_filter(w: np.ndarray, m: int) -> np.ndarray:
    """OIHW 3x3 filter -> U [a*a, C, O] = G g G^T per (C, O), computed in float64."""
    o, c = w.shape[:2]
    g = np.asarray(G[m], np.float64)
    taps = np.asarray(w, np.float64).transpose(2, 3, 1, 0).reshape(9, c * o)
    return np.ascontiguousarray((np.kron(g, g) @ taps).reshape((m + 2) ** 2, c, o), np.float32)


class Winograd:
    def __init__(self, geo: ConvGeometry, w: np.ndarray, m: int, compute: ComputeContext = SERIAL):
        self.geo, self.m, self.a, self.compute = geo, m, m + 2, compute
        self.tiles_h, self.tiles_w = -(-geo.oh // m), -(-geo.ow // m)
        a2 = self.a * self.a
        self.rows = max(1, min(self.tiles_h, CHUNK_BYTES // (a2 * self.tiles_w * geo.c * 4)))
        self.u = transform_filter(w, m)
        bt, at = np.asarray(B_T[m], np.float32), np.asarray(A_T[m], np.float32)
        self.bk, self.ak = np.kron(bt, bt), np.kron(at, at)
        t = self.rows * self.tiles_w
        # The padded input covers every tile: extra zero rows / columns at the bottom / right.
        self.xp_shape = (geo.n, self.tiles_h * m + 2, self.tiles_w * m + 2, geo.c)
        exact = (self.tiles_h * m, self.tiles_w * m) == (geo.oh, geo.ow)
        # Flat buffers: a shorter last chunk takes a contiguous prefix of each.
        self.specs = [((a2 * t * geo.c,), np.float32), ((a2 * t * geo.c,), np.float32),
                      ((a2 * t * geo.o,), np.float32), ((m * m * t * geo.o,), np.float32),
                      (self.xp_shape, np.float32)]
        if not exact:  # whole tiles land here, then the valid part is copied out
            self.specs.append(((geo.n, self.tiles_h * m, self.tiles_w * m, geo.o), np.float32))

    @property
    def name(self) -> str:
        return f"winograd-f{self.m}"   # F(m x m, 3 x 3): what the profiler shows

    def steps(self, x, out, scratch) -> list:
        g, m, a = self.geo, self.m, self.a
        d, v, mm, y, xp = scratch[:5]
        full = scratch[5] if len(scratch) > 5 else out
        steps = pad_steps(xp, x, g.pads, compute=self.compute)
        for image in range(g.n):
            for r0 in range(0, self.tiles_h, self.rows):
                rows = min(self.rows, self.tiles_h - r0)
                t = rows * self.tiles_w
                dt, vt = d[:a * a * t * g.c], v[:a * a * t * g.c]
                mt, yt = mm[:a * a * t * g.o], y[:m * m * t * g.o]
                src = _tile_view(xp[image, r0 * m:], a, m, rows, self.tiles_w)
                dst = _tile_view(full[image, r0 * m:], m, m, rows, self.tiles_w)
                steps += [partial(np.copyto, dt.reshape(src.shape), src),
                          self.compute.matmul(self.bk, dt.reshape(a * a, -1), vt.reshape(a * a, -1)),
                          self.compute.matmul(vt.reshape(a * a, t, g.c), self.u, mt.reshape(a * a, t, g.o)),
                          self.compute.matmul(self.ak, mt.reshape(a * a, -1), yt.reshape(m * m, -1)),
                          partial(np.copyto, dst, yt.reshape(dst.shape))]
        if full is not out:
            steps.append(partial(np.copyto, out, full[:, :g.oh, :g.ow]))
        return steps


def _tile_view(img, size: int, step: int, rows: int, cols: int):
    """View [size, size, rows, cols, C] of `img` [H, W, C]: tile (r, c) starts at (r, c) * step."""
    s0, s1, s2 = img.strides
    return as_strided(img, (size, size, rows, cols, img.shape[2]),
                      (s0, s1, s0 * step, s1 * step, s2))
