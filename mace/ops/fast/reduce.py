"""Reduce, fast CPU kernel: MEAN / SUM / MAX / MIN over H and W of an NHWC float32 tensor
(global pooling at a classifier's head) as one compiled pass over [n, pixels, C]. The
reference's np.mean over axes (1, 2) costs 40-100 us on MobileNet's / DenseNet's heads.

SUM / MEAN of float32 over a last axis shorter than 8 (basic_pitch sums the 2 halves of each
complex value) are k whole-tensor adds: numpy reduces such a row by a call of its inner loop per
output (2.3 ms for 53k pairs where one np.add takes 0.03). Its order for a row under 8 is
((0 + x0) + x1) + ..., which the adds repeat (0 + x0 too: -0.0 sums to +0.0 as numpy's), then
MEAN's division by k: the same bytes. Other float32 MEAN / SUM / MAX / MIN / PROD reductions are
numpy's own into the output (no fresh result and copy); the rest (L1, L2, LOGSUMEXP, ...,
empty axes, reduced axes of size 0) stay with the reference."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import reduce as _reference
from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel
from mace.ops.fast._jit import loops
from mace.ops.registry import kernel

KINDS = {"MEAN": 0, "SUM": 1, "MAX": 2, "MIN": 3}


def global_pixels(ctx) -> bool:
    shape = ctx.input_shapes[0]
    return (loops() is not None and ctx.arg("reduce_type") in KINDS and len(shape) == 4
            and _reference.reduce_axes(ctx.arg, 4) == (1, 2) and shape[1] * shape[2] > 0
            and np.dtype(ctx.input_dtypes[0]) == np.float32
            and np.dtype(ctx.output_dtypes[0]) == np.float32)


SHORT_ROW = 8   # numpy sums a row under 8 values one after another from 0; longer rows pairwise


def _float32(ctx) -> bool:
    return np.dtype(ctx.input_dtypes[0]) == np.float32 and np.dtype(ctx.output_dtypes[0]) == np.float32


def short_last_axis(ctx) -> bool:
    shape = ctx.input_shapes[0]
    return (ctx.arg("reduce_type") in ("SUM", "MEAN") and _float32(ctx) and len(shape) >= 1
            and _reference.reduce_axes(ctx.arg, len(shape)) == (len(shape) - 1,)
            and 1 <= shape[-1] < SHORT_ROW)


def numpy_reduce(ctx) -> bool:
    shape = ctx.input_shapes[0]
    axes = _reference.reduce_axes(ctx.arg, len(shape))
    return (ctx.arg("reduce_type") in NUMPY and _float32(ctx) and bool(axes)
            and all(shape[a] > 0 for a in axes))


NUMPY = {"MEAN": np.mean, "SUM": np.sum, "MAX": np.max, "MIN": np.min, "PROD": np.prod}


@kernel("Reduce", "cpu:fast")
class ReduceFast(FastKernel):
    @staticmethod
    def check(ctx) -> str | None:
        if global_pixels(ctx) or short_last_axis(ctx) or numpy_reduce(ctx):
            return None
        kind, shape = ctx.arg("reduce_type"), ctx.input_shapes[0]
        if not _float32(ctx):
            return f"{np.dtype(ctx.input_dtypes[0])} to {np.dtype(ctx.output_dtypes[0])} (float32 only)"
        if kind not in NUMPY and kind not in KINDS:
            return f"Reduce {kind} has no fast form"
        axes = _reference.reduce_axes(ctx.arg, len(shape))
        return "no axis to reduce" if not axes else f"reduces over an empty axis of {list(shape)}"

    def setup(self, ctx):
        self.path = "pixels" if global_pixels(ctx) else "short" if short_last_axis(ctx) else "numpy"
        self.type = ctx.arg("reduce_type")
        self.kind = KINDS.get(self.type)
        self.axes = _reference.reduce_axes(ctx.arg, len(ctx.input_shapes[0]))

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        kept = tuple(1 if i in self.axes else d for i, d in enumerate(x.shape))
        if not out.flags.c_contiguous:   # the reshapes below must be views
            return super().bind(inputs, outputs, scratch)
        if self.path == "numpy":
            return partial(NUMPY[self.type], x, axis=self.axes, keepdims=True, out=out.reshape(kept))
        if self.path == "short":
            return self._short(x, out.reshape(kept)[..., 0])
        n, h, w, c = x.shape
        # arena tensors are contiguous: both reshapes are views
        return partial(loops().reduce_pixels, x.reshape(n, h * w, c), self.kind, out.reshape(n, c))

    def run(self, inputs, outputs):
        _reference.ReduceCpu(self.ctx).run(inputs, outputs)

    def _short(self, x, out):
        k = x.shape[-1]
        steps = [partial(np.add, x[..., 0], np.float32(0), out=out)]   # numpy's 0 + x0 first
        steps += [partial(np.add, out, x[..., i], out=out) for i in range(1, k)]
        if self.type == "MEAN":
            steps.append(partial(np.divide, out, np.float32(k), out=out))
        return sequence(steps)
