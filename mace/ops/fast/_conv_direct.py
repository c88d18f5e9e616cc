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
from mace.ops.fast._jit import loops

# Measured on the digits convs (AMD EPYC, 1 thread): the loop runs ~5 GMAC/s, so 32K
# MACs is ~6 us, where pad + im2col + GEMM start to win.
DIRECT_MAX_MACS = 1 << 15


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
        # one output pixel whose window is the whole unpadded input (a streaming model's conv over
        # its buffer of frames) and a window at least twice as long as the filters are many: a
        # FullyConnected of the flattened image, the FC's own loop (_loops.dense_rows: a dot
        # product per filter, vectorized along the window). microWakeWord's 5 x 40 -> 30 conv:
        # 1.5 -> 0.64 us. Fewer taps than twice the filters (a 1x1 conv of 60 -> 60 on one
        # pixel) stay on conv_direct, vectorized along the filters: 0.53 us against 0.67.
        self.rows = None
        k = geo.kh * geo.kw * geo.c
        if (geo.oh == geo.ow == 1 and geo.kh == geo.h and geo.kw == geo.w and not any(geo.pads)
                and tuple(geo.dilations) == (1, 1) and k >= 2 * geo.o):
            self.rows = np.ascontiguousarray(np.asarray(w, np.float32).transpose(0, 2, 3, 1).reshape(geo.o, -1))
            self.rows.flags.writeable = False   # the FullyConnected's weight type: its compiled code serves

    def steps(self, x, out, scratch) -> list:
        g = self.geo
        if self.rows is not None and x.flags.c_contiguous and out.flags.c_contiguous:
            return [partial(loops().dense_rows, x.reshape(g.n, -1), self.rows, self.bias, *self.bounds,
                            out.reshape(g.n, -1), 0, g.o)]
        return [partial(loops().conv_direct, x, self.wmat, self.bias, *self.bounds,
                        g.strides[0], g.strides[1], g.dilations[0], g.dilations[1],
                        g.pads[0], g.pads[1], out)]
