"""Tiny convolutions as one compiled loop (numba) with bias and clip fused in.

On maps of a few hundred values every numpy call is overhead: the digits
example's 8x8x1 -> 8 conv took 2.6 us as one GEMM over an unrolled matrix
(_conv_dense) plus the epilogue, its 8x8x8 -> 4x4x16 one 4 us through
padding + im2col + GEMM; the direct loop (_loops.conv_direct) does either in
about a microsecond. Used for group-1 convs up to DIRECT_MAX_MACS whose
activation is a clip (or none), when numba is installed.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._base import loop_bias
from mace.ops.fast._conv_gemm import ConvGeometry
from mace.ops.fast._jit import loops, op_loops

# Measured on the digits convs (AMD EPYC, 1 thread): the loop runs ~5 GMAC/s, so 32K
# MACs is ~6 us, where pad + im2col + GEMM start to win.
DIRECT_MAX_MACS = 1 << 15
# filters from which a row product keeps them in registers (Direct.__init__)
PIXEL_MIN_FILTERS = 16


def fits(geo: ConvGeometry, bounds) -> bool:
    macs = geo.n * geo.oh * geo.ow * geo.o * geo.kh * geo.kw * geo.cg
    return geo.group == 1 and bounds is not None and macs <= DIRECT_MAX_MACS and loops() is not None


class Direct:
    """`steps` writes the finished output: bias and activation are part of the loop."""
    name = "direct"   # what the profiler shows (Conv2DFast.algorithm_name)
    fused_epilogue = True

    def __init__(self, geo: ConvGeometry, w: np.ndarray, bias, bounds):
        self.geo, self.specs = geo, []
        self.wmat = np.ascontiguousarray(np.asarray(w, np.float32).transpose(2, 3, 1, 0))  # kh kw C O
        self.bias = loop_bias(bias, geo.o)
        self.bounds = bounds
        # a product of rows by the weight: one output pixel whose window is the whole unpadded
        # input (a streaming model's conv over its buffer of frames, an SE squeeze), or a 1x1
        # conv without stride or pads (its pixels are the rows). From 16 filters, the filters
        # sit in registers 16 a vector, the window fma chains on them (_pixel_loops.pixel_rows:
        # microWakeWord's 60 -> 60 on one pixel 0.31 -> 0.1 us, its 5 x 40 -> 30 0.2 -> 0.18 us
        # in a loop); with fewer, a window at least twice as long as the filters are many runs
        # the FullyConnected's loop, a dot product per filter along the window
        # (_loops.dense_rows), else conv_direct's loop.
        self.rows = self.wide = None
        k = geo.kh * geo.kw * geo.c
        whole = (geo.oh == geo.ow == 1 and geo.kh == geo.h and geo.kw == geo.w and not any(geo.pads)
                 and tuple(geo.dilations) == (1, 1))
        pointwise = geo.kh == geo.kw == 1 and tuple(geo.strides) == (1, 1) and not any(geo.pads)
        pixel = geo.o >= PIXEL_MIN_FILTERS and op_loops("_pixel_loops") is not None
        if whole and not pixel and k >= 2 * geo.o:
            self.rows = np.ascontiguousarray(np.asarray(w, np.float32).transpose(0, 2, 3, 1).reshape(geo.o, -1))
            self.rows.flags.writeable = False   # the FullyConnected's weight type: its compiled code serves
        elif (whole or pointwise) and pixel:
            wide = -(-geo.o // 16) * 16
            self.wide = np.zeros((k, wide), np.float32)
            self.wide[:, :geo.o] = self.wmat.reshape(k, geo.o)
            self.wide.flags.writeable = False
            self.acc = np.zeros(wide, np.float32)

    def steps(self, x, out, scratch) -> list:
        g = self.geo
        if self.wide is not None and x.flags.c_contiguous and out.flags.c_contiguous:
            k = self.wide.shape[0]
            return [partial(op_loops("_pixel_loops").pixel_rows, x.reshape(-1, k), self.wide, self.bias,
                            *self.bounds, self.acc, out.reshape(-1, g.o))]
        if self.rows is not None and x.flags.c_contiguous and out.flags.c_contiguous:
            return [partial(loops().dense_rows, x.reshape(g.n, -1), self.rows, self.bias, *self.bounds,
                            out.reshape(g.n, -1), 0, g.o)]
        return [partial(loops().conv_direct, x, self.wmat, self.bias, *self.bounds,
                        g.strides[0], g.strides[1], g.dilations[0], g.dilations[1],
                        g.pads[0], g.pads[1], out)]
