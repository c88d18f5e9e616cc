"""Transpose, fast CPU kernel: a small innermost output axis is copied one index at a time.

numpy's permuted copy runs its inner loop along the output's last axis; when that
axis is short (ShuffleNet's channel shuffle moves groups of 3 innermost, an NCHW
image's 3 channels become NHWC's last axis) the loop is 3 long and the copy
crawls. Copying out[..., j] for each j instead reads whole contiguous rows:
ShuffleNet's shuffles ran 3.2x faster (784x3x80: 164 -> 51 us).

A permutation that (once size-1 axes are dropped and axes that stay adjacent
are merged) is out[b, c, r] = in[b, r, c] with more rows than columns -- NHWC
-> NCHW -- is copied in blocks of BLOCK_ROWS input rows: each block's reads and
writes stay in cache (ShuffleNet's 56x56x112 -> 112x56x56: 190 -> 100 us,
28x28x136: 38 -> 29 us). The other direction gains nothing from blocks.
An NCHW image's few channels going innermost (out[b, p, c] = in[b, c, p], C <= 8)
run as one compiled loop split across the compute pool (224x224x3: 47 -> 26 us on
one thread, 18 us on two; 3x32x32: 4.2 -> 0.8 us; numpy's per-channel copies without numba).
A permutation that only moves size-1 axes (the digits example's 1x1x8x8 NCHW
input to NHWC) is a reshaped copy (0.6 -> 0.3 us).
Any other permutation is numpy's permuted copy from a view taken once at load (what the
reference does on every run, less its per-run transpose); where the innermost axis stays
innermost and is 2 floats (basic_pitch's [0, 2, 1, 3] of 309x172x2), the pairs move as one
8-byte element: half the elements to step over, the same bytes.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel
from mace.ops.fast._jit import loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel

SMALL_AXIS = 8
BLOCK_ROWS = 256
MIN_ELEMENTS = 4096   # below this one permuted copy beats SMALL_AXIS calls (per-call overhead)


def _dims(ctx) -> list:
    return ctx.arg("dims", []) or list(range(len(ctx.input_shapes[0])))[::-1]


def swap_shape(shape, dims):
    """(batch, rows, cols) when transposing `shape` by `dims` is out[b, c, r] = in[b, r, c]
    (after dropping size-1 axes and merging axes that stay adjacent), else None."""
    keep = [d for d in dims if shape[d] != 1]
    rank = {d: i for i, d in enumerate(sorted(keep))}
    sizes = [shape[d] for d in sorted(keep)]
    groups = []    # runs of input axes that stay adjacent and in order in the output
    for p in (rank[d] for d in keep):
        if groups and groups[-1][-1] + 1 == p:
            groups[-1].append(p)
        else:
            groups.append([p])
    starts = sorted(g[0] for g in groups)
    order = [starts.index(g[0]) for g in groups]
    size = [int(np.prod([sizes[p] for p in g])) for g in sorted(groups)]
    if order == [1, 0]:
        return 1, size[0], size[1]
    if order == [0, 2, 1]:
        return tuple(size)
    return None


def moves_only_unit_axes(ctx) -> bool:
    """The permutation keeps every axis longer than 1 in order: the copy is a reshape."""
    shape = ctx.input_shapes[0]
    keep = [d for d in _dims(ctx) if shape[d] != 1]
    return keep == sorted(keep) and np.dtype(ctx.input_dtypes[0]) == np.dtype(ctx.output_dtypes[0])


def worth_blocking(ctx) -> bool:
    swap = swap_shape(ctx.input_shapes[0], _dims(ctx))
    return (swap is not None and swap[1] > max(swap[2], BLOCK_ROWS)
            and int(np.prod(ctx.input_shapes[0])) >= MIN_ELEMENTS
            and np.dtype(ctx.input_dtypes[0]) == np.dtype(ctx.output_dtypes[0]))


def worth_splitting(ctx) -> bool:
    dims, shape = _dims(ctx), ctx.input_shapes[0]
    return (len(dims) >= 2 and dims[-1] != len(dims) - 1 and shape[dims[-1]] <= SMALL_AXIS
            and int(np.prod(shape)) >= MIN_ELEMENTS
            and np.dtype(ctx.input_dtypes[0]) == np.dtype(ctx.output_dtypes[0]))


def same_dtype(ctx) -> str | None:
    """A permutation of the elements: the output's dtype must be the input's."""
    if np.dtype(ctx.input_dtypes[0]) == np.dtype(ctx.output_dtypes[0]):
        return None
    return f"casts {np.dtype(ctx.input_dtypes[0])} to {np.dtype(ctx.output_dtypes[0])}"


def wide_pairs(x, out, dims):
    """(x, out) viewed with the innermost axis's 8 bytes as one int64 element, when the
    permutation keeps that axis innermost and both are contiguous; else None."""
    if not (dims and dims[-1] == x.ndim - 1 and x.shape[-1] * x.itemsize == 8
            and x.flags.c_contiguous and out.flags.c_contiguous and x.size):
        return None
    return x.view(np.int64)[..., 0], out.view(np.int64)[..., 0]


@kernel("Transpose", "cpu:fast")
class TransposeFast(FastKernel):
    check = staticmethod(same_dtype)

    def setup(self, ctx):
        self.dims = _dims(ctx)
        self.reshape = moves_only_unit_axes(ctx)
        swap = swap_shape(ctx.input_shapes[0], self.dims)
        self.swap = swap if worth_blocking(ctx) else None
        # an NCHW image -> NHWC: a compiled loop (on the pool's threads when it is there), of
        # any size: it is one call (a 3 x 32 x 32 input: 4.2 us as numpy's permuted copy)
        self.narrow = swap if (swap is not None and swap[1] <= SMALL_AXIS and swap[2] > 1
                               and same_dtype(ctx) is None and loops() is not None) else None
        self.split_last = worth_splitting(ctx)

    def bind(self, inputs, outputs, scratch=None):
        loop = compute_of(self.ctx).loop   # the engine's threads
        x, out = inputs[0], outputs[0]
        if self.reshape and x.flags.c_contiguous:   # e.g. NCHW -> NHWC of one channel
            return partial(np.copyto, out, x.reshape(out.shape))
        if self.swap is not None:
            return self._blocks(x, out)
        if self.narrow is not None and x.flags.c_contiguous and out.flags.c_contiguous:
            b, r, c = self.narrow
            src, dst = x.reshape(b, r, c), out.reshape(b, c, r)
            return sequence([loop("narrow_transpose", (src[i], dst[i]), c, r * c) for i in range(b)])
        if self.split_last:
            src, out = inputs[0].transpose(self.dims), outputs[0]
            return sequence([partial(np.copyto, out[..., j], src[..., j]) for j in range(out.shape[-1])])
        pairs = wide_pairs(x, out, self.dims)
        if pairs is not None:
            x, out = pairs
        return partial(np.copyto, out, x.transpose(self.dims[:x.ndim]))

    def _blocks(self, x, out):
        if not (x.flags.c_contiguous and out.flags.c_contiguous):   # reshapes must be views
            return partial(np.copyto, out, x.transpose(self.dims))
        b, r, c = self.swap
        src, dst = x.reshape(b, r, c), out.reshape(b, c, r)
        return sequence([partial(np.copyto, dst[:, :, i:i + BLOCK_ROWS],
                                 src[:, i:i + BLOCK_ROWS].transpose(0, 2, 1))
                         for i in range(0, r, BLOCK_ROWS)])
