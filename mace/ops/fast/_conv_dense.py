"""Tiny convolutions as one dense matrix: out_flat = x_flat @ T, T built from the filter at load.

For feature maps of a few hundred values (the 8x8 digits example) the work is
a handful of numpy calls' overhead, not arithmetic: one GEMM over the
unrolled (Toeplitz) matrix beats padding + im2col + GEMM (3 + kh*kw calls).
Used only while T stays small (see DENSE_MAX_ELEMENTS).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._base import clip_bounds, in_place_step
from mace.ops.fast._conv_gemm import ConvGeometry, contiguous
from mace.ops.fast._jit import loops
from mace.ops.fast.compute import SERIAL, ComputeContext

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
    """With numba: the compiled dense_rows loop over T's rows (t: T transposed, [oh*ow*O,
    H*W*C]) with the bias and a clip fused, any other activation a compiled loop after it: a
    squeeze-and-excitation block's 1 x 1 convs (a few hundred multiply-adds each) were
    np.matmul, np.add and the activation, three Python calls and no step a chain could take
    (ppocr_v2_cls: nine of them, each cutting its two-thread run's parallel region in two).
    Without numba: numpy's product, the kernel's epilogue after it."""
    name = "dense"   # what the profiler shows (Conv2DFast.algorithm_name)

    def __init__(self, geo: ConvGeometry, w: np.ndarray, bias=None, act=None, slope=None,
                 compute: ComputeContext = SERIAL):
        self.geo, self.specs, self.compute = geo, [], compute
        self.t = np.ascontiguousarray(unrolled(geo, w).T)
        self.fused_epilogue = loops() is not None
        if self.fused_epilogue:
            self.act, self.slope = act or {}, slope
            bounds = clip_bounds(self.act)
            self.bounds = bounds if bounds is not None else clip_bounds({})
            self.tail = bounds is None   # an activation that is not a clip: a step of its own
            self.bias = (np.tile(np.asarray(bias, np.float32), geo.oh * geo.ow) if bias is not None
                         else np.zeros(self.t.shape[0], np.float32))

    def steps(self, x, out, scratch) -> list:
        n, steps = self.geo.n, []
        x2d, out2d = contiguous(x, steps).reshape(n, -1), out.reshape(n, -1)   # (out: an arena tensor)
        if not self.fused_epilogue:
            return steps + [partial(np.matmul, x2d, self.t.T, out=out2d)]
        steps.append(self.compute.loop("dense_rows", (x2d, self.t, self.bias, *self.bounds, out2d),
                                       self.t.shape[0], self.t.size))
        return steps + ([in_place_step(self.act, out, self.slope)] if self.tail else [])
