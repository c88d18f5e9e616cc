"""Tiny convolutions as one dense matrix: out_flat = x_flat @ T, T built from the filter at load.

For feature maps of a few hundred values (the 8x8 digits example) the work is
a handful of numpy calls' overhead, not arithmetic: one GEMM over the
unrolled (Toeplitz) matrix beats padding + im2col + GEMM (3 + kh*kw calls).
Used only while T stays small (see DENSE_MAX_ELEMENTS).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._conv_gemm import ConvGeometry

# T is read whole on every run: at 8x8x1 -> 8 channels (32K elements) one GEMM takes 5.5 us
# against 7.2 us for pad + im2col + GEMM, at 8x8x8 -> 4x4x16 (131K) 9.4 us against 6.7 us.
DENSE_MAX_ELEMENTS = 1 << 15   # 128 KiB of float32
DENSE_MAX_WASTE = 16           # T may hold at most this many times the filter's MACs


def fits(geo: ConvGeometry) -> bool:
    size = geo.h * geo.w * geo.c * geo.oh * geo.ow * geo.o
    macs = geo.oh * geo.ow * geo.o * geo.kh * geo.kw * geo.cg
    return size <= DENSE_MAX_ELEMENTS and size <= DENSE_MAX_WASTE * max(macs, 1)


def unrolled(geo: ConvGeometry, w: np.ndarray) -> np.ndarray:
    """T [H*W*C, oh*ow*O] with x_flat @ T == conv(x) for one NHWC image (OIHW filter w)."""
    t = np.zeros((geo.h, geo.w, geo.c, geo.oh, geo.ow, geo.o), np.float32)
    w = np.asarray(w, np.float32)
    for grp in range(geo.group):
        ci, co = slice(grp * geo.cg, (grp + 1) * geo.cg), slice(grp * geo.og, (grp + 1) * geo.og)
        for i in range(geo.kh):
            for j in range(geo.kw):
                tap = w[co, :, i, j].T          # [Cg, Og]
                for y in range(geo.oh):
                    r = y * geo.strides[0] + i * geo.dilations[0] - geo.pads[0]
                    if not 0 <= r < geo.h:
                        continue
                    for x in range(geo.ow):
                        c = x * geo.strides[1] + j * geo.dilations[1] - geo.pads[1]
                        if 0 <= c < geo.w:
                            t[r, c, ci, y, x, co] += tap
    return t.reshape(geo.h * geo.w * geo.c, -1)


class Dense:
    name = "dense"   # what the profiler shows (Conv2DFast.algorithm_name)

    def __init__(self, geo: ConvGeometry, w: np.ndarray):
        self.geo, self.t, self.specs = geo, unrolled(geo, w), []

    def steps(self, x, out, scratch) -> list:
        n = self.geo.n
        return [partial(np.matmul, x.reshape(n, -1), self.t, out=out.reshape(n, -1))]
