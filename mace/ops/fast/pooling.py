"""Pooling, fast CPU kernel: separable max / average over NHWC, global pooling as one reduction.

A kh x kw window is reduced along W into a scratch row buffer, then along H
(kw-1 + kh-1 ufunc calls instead of kh*kw-1: SqueezeNet's 3x3/2 max pools went
from 0.52 to ~0.2 ms). The input is used as it is when there is no padding;
otherwise a padded copy in scratch gets -inf (max) or 0 (average) borders.
Average divisors are precomputed reciprocals. Geometry comes from the
reference module's pool_geometry, so both kernels agree on ceil_mode.
With numba (mace/ops/fast/_jit.py) one compiled loop (_loops.pool) does the
whole window in one pass, padding skipped rather than copied (SqueezeNet's
111x111x64 3x3/2 max pool: 0.24 -> 0.11 ms). A global pool of 16 channels or more is
_line_loops.global_pool, the channels in registers over the pixels (numpy's mean over two
leading axes walks the map 16 channels at a time: a 128 x 128 x 16 squeeze 368 -> 14 us).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel, carve, scratch_size
from mace.ops.fast._checks import not_float32
from mace.ops.fast._conv_gemm import pad_steps
from mace.ops.fast._jit import loops, op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.pooling import pool_geometry
from mace.ops.registry import kernel


def pool_check(ctx) -> str | None:
    if ctx.arg("data_format", "NHWC") != "NHWC":
        return f"data_format {ctx.arg('data_format', 'NHWC')} (NHWC only)"
    if len(ctx.input_shapes[0]) != 4:
        return f"rank {len(ctx.input_shapes[0])} input (4-D only)"
    return not_float32(ctx)


def _counts(size, pad_lo, pad_hi, k, stride, dil, out, include_pad):
    """Per output index along one axis: window cells that count towards an average."""
    lo, hi = (0, size + pad_lo + pad_hi) if include_pad else (pad_lo, pad_lo + size)
    starts = np.arange(out) * stride
    taps = starts[:, None] + np.arange(k)[None, :] * dil
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


@kernel("Pooling", "cpu:fast")
class PoolingFast(FastKernel):
    check = staticmethod(pool_check)

    def setup(self, ctx):
        (n, h, w, c), k, s, d, p, (oh, ow) = pool_geometry(ctx, ctx.input_shapes[0])
        self.k, self.s, self.d, self.p, self.out_hw = k, s, d, p, (oh, ow)
        self.is_max = ctx.arg("pooling_type") == "MAX"
        self.global_pool = (tuple(k) == (h, w) and not any(p) and (oh, ow) == (1, 1))
        # rows / columns the windows reach, ceil_mode's overhang included
        self.span = ((oh - 1) * s[0] + (k[0] - 1) * d[0] + 1, (ow - 1) * s[1] + (k[1] - 1) * d[1] + 1)
        self.padded = not self.global_pool and (any(p) or self.span[0] > h or self.span[1] > w)
        specs = [((n, self.span[0], ow, c), np.float32)]
        if self.padded:
            specs.append(((n, max(self.span[0], h + p[0]), max(self.span[1], w + p[1]), c), np.float32))
        self.specs = [] if self.global_pool else specs
        self.scratch_nbytes = scratch_size(self.specs)
        if not self.is_max:
            include = bool(ctx.arg("count_include_pad", 0))
            ch = _counts(h, p[0], p[2], k[0], s[0], d[0], oh, include)
            cw = _counts(w, p[1], p[3], k[1], s[1], d[1], ow, include)
            count = np.maximum(ch[:, None] * cw[None, :], 1).astype(np.float32)
            self.scale = (1.0 / count)[None, :, :, None]
        self.compiled = not self.global_pool and loops() is not None
        if self.compiled:
            self.specs, self.scratch_nbytes = [], 0
            scale = np.ones((1, 1), np.float32) if self.is_max else self.scale[0, :, :, 0]
            self.loop_args = (self.is_max, k[0], k[1], s[0], s[1], d[0], d[1], p[0], p[1],
                              np.ascontiguousarray(scale, np.float32))

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if self.global_pool:
            n, h, w, c = x.shape
            lines = op_loops("_line_loops") if c >= 16 else None
            if lines is not None and x.flags.c_contiguous and out.flags.c_contiguous:
                # rows: (image, 64 channels): split over the pool only where there are several
                return compute_of(self.ctx).loop("global_pool", (x.reshape(n, h * w, c), self.is_max,
                                                                 out.reshape(n, c)),
                                                 n * -(-c // 64), x.size, lib=lines)
            reduce = np.max if self.is_max else np.mean
            return partial(reduce, x, axis=(1, 2), keepdims=True, out=out)
        if self.compiled:   # the loop reads whole input rows flat: a C-contiguous input
            x = x if x.flags.c_contiguous else np.ascontiguousarray(x)   # (arena tensors are)
            return compute_of(self.ctx).loop("pool", (x, *self.loop_args, out), out.shape[0] * out.shape[1],
                        x.size + out.size)
        bufs = carve(scratch, self.specs)
        rows, steps, src = bufs[0], [], x
        if self.padded:
            src = bufs[1]
            steps += pad_steps(src, x, self.p, -np.inf if self.is_max else 0.0, compute_of(self.ctx))
        ufunc = np.maximum if self.is_max else np.add
        steps += _reduce_axis(ufunc, src[:, :self.span[0]], rows, 2, self.k[1], self.s[1], self.d[1])
        steps += _reduce_axis(ufunc, rows, out, 1, self.k[0], self.s[0], self.d[0])
        if not self.is_max:
            steps.append(partial(np.multiply, out, self.scale, out=out))
        return sequence(steps)


def _reduce_axis(ufunc, src, dst, axis, k, stride, dil) -> list:
    """Steps: dst = ufunc-reduction over the k taps of `src` along `axis` (1: H, 2: W)."""
    n_out = dst.shape[axis]

    def tap(i):
        index = [slice(None)] * 4
        index[axis] = slice(i * dil, i * dil + stride * (n_out - 1) + 1, stride)
        return src[tuple(index)]
    if k == 1:
        return [partial(np.copyto, dst, tap(0))]
    return [partial(ufunc, tap(0), tap(1), out=dst)] + \
        [partial(ufunc, dst, tap(i), out=dst) for i in range(2, k)]
