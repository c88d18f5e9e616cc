"""ResizeNearestNeighbor and ResizeBilinear on NHWC float32 tensors, fast CPU kernels: one
compiled gather per output row (_resize_loops.py), split across the compute pool's threads.

The references take rows, then columns, with np.take into an intermediate as large as a row-
resized input, and bilinear blends with four more full passes. The loops read each source
pixel's channels in place and write each output pixel once: the same picks and weights (the
references' tables, built at load), the same bytes. Declined (the references run): no numba,
NCHW (met only when folding a constant), other dtypes, empty tensors. A nearest resize that
repeats each pixel a whole number of times along H and W is one broadcast copy instead.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._resize import axis_params
from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel
from mace.ops.resize_bilinear import linear_table
from mace.ops.resize_nearest import nearest_index


def _lib():
    return op_loops("_resize_loops")


def nhwc_float32(ctx) -> str | None:
    shape, out = tuple(ctx.input_shapes[0]), tuple(ctx.output_shapes[0])
    if _lib() is None:
        return NO_LOOPS
    if ctx.arg("data_format", "NHWC") != "NHWC":
        return f"data_format {ctx.arg('data_format', 'NHWC')} (NHWC only)"
    if len(shape) != 4 or 0 in shape or 0 in out:
        return f"input {list(shape)}, output {list(out)} (4-D, not empty)"
    return not_float32(ctx)


class _ResizeFast(FastKernel):
    check = staticmethod(nhwc_float32)

    def bind(self, inputs, outputs, scratch=None):
        out = outputs[0]
        n, oh, ow, c = out.shape
        return compute_of(self.ctx).loop(self.name, (inputs[0], *self.tables, out), n * oh, out.size, lib=_lib())


@kernel("ResizeNearestNeighbor", "cpu:fast")
class ResizeNearestFast(_ResizeFast):
    name = "nearest"

    def setup(self, ctx):
        axes, mode = axis_params(ctx, ctx.input_shapes[0])
        nearest_mode = ctx.arg("nearest_mode", "round_prefer_floor")
        self.tables = tuple(nearest_index(i, o, s, mode, nearest_mode).astype(np.int64) for i, o, s in axes)
        # each input pixel repeated f_h x f_w times (an FPN's 2x / 4x / 8x upsample): one broadcast
        # copy, 3.5x faster than the per-pixel loop (40x40x96 -> 80x80: 151 vs 526 us)
        self.factors = tuple(o // i for i, o, _ in axes)
        if any(o != i * f or not np.array_equal(t, np.arange(o) // f)
               for (i, o, _), f, t in zip(axes, self.factors, self.tables)):
            self.factors = None

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if self.factors is None or not out.flags.c_contiguous:
            return super().bind(inputs, outputs, scratch)
        (fh, fw), (n, h, w, c) = self.factors, x.shape
        return partial(np.copyto, out.reshape(n, h, fh, w, fw, c), x[:, :, None, :, None, :])


@kernel("ResizeBilinear", "cpu:fast")
class ResizeBilinearFast(_ResizeFast):
    name = "bilinear"

    def setup(self, ctx):
        axes, mode = axis_params(ctx, ctx.input_shapes[0])
        tables = []
        for i, o, s in axes:
            lo, hi, w_lo, w_hi = linear_table(i, o, s, mode)
            tables += [np.ascontiguousarray(np.stack([lo, hi], 1), np.int64),
                       np.ascontiguousarray(np.stack([w_lo, w_hi], 1), np.float32)]
        self.tables = tuple(tables)
