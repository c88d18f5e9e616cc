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
Any other permutation of 2-4 axes (once unit axes drop and adjacent ones merge) is one compiled
copy, _transpose_loops.permute4, where it is not slower than numpy's (`_compiled`: out's rows
contiguous in the input, as a BERT's attention-head transposes; or long, as a detector head's
NHWC -> NCHW, which it gathers in blocks: 7600 x 32 97 -> 82 us; or a small tensor): a step a
chain takes, split across the compute pool by rows. It goes before the blocked NHWC -> NCHW
copies above where it applies. The rest is numpy's permuted copy from a view taken once at
load (what the reference does on every run, less its per-run transpose); where the innermost
axis stays innermost and is 2 floats (basic_pitch's [0, 2, 1, 3] of 309x172x2), the pairs
move as one 8-byte element: half the elements to step over, the same bytes (and so in the
compiled copy).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel
from mace.ops.fast._jit import loops, op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel

SMALL_AXIS = 8
BLOCK_ROWS = 256
MIN_ELEMENTS = 4096   # below this one permuted copy beats SMALL_AXIS calls (per-call overhead)
COMPILED_MIN_ROW = 256        # out rows gathered this long or longer (a BLOCK or more): the blocked gather wins
COMPILED_MAX_SMALL = 1 << 14  # a tensor this small takes the compiled copy whatever its rows


def _dims(ctx) -> list:
    return ctx.arg("dims", []) or list(range(len(ctx.input_shapes[0])))[::-1]


def merged(shape, dims) -> tuple:
    """(sizes, order): transposing `shape` by `dims` with size-1 axes dropped and the runs of
    input axes that stay adjacent and in order in the output merged into one: the merged input
    shape (`sizes`, input order) and the permutation of it (`order`) the transpose is."""
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
    return [int(np.prod([sizes[p] for p in g])) for g in sorted(groups)], order


def swap_shape(shape, dims):
    """(batch, rows, cols) when transposing `shape` by `dims` is out[b, c, r] = in[b, r, c]
    (after dropping size-1 axes and merging axes that stay adjacent), else None."""
    size, order = merged(shape, dims)
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
        # any size: it is one call (a 3 x 32 x 32 input: 4.2 us as numpy's permuted copy). Not
        # for many small images (a call each: ShuffleNet's [784, 2, 58] channel shuffle took
        # 132 us as 784 calls, 30 us as the two column copies of `split_last`)
        few = swap is not None and (swap[0] <= SMALL_AXIS or swap[1] * swap[2] >= MIN_ELEMENTS)
        self.narrow = swap if (few and swap[1] <= SMALL_AXIS and swap[2] > 1
                               and same_dtype(ctx) is None and loops() is not None) else None
        self.split_last = worth_splitting(ctx)

    def bind(self, inputs, outputs, scratch=None):
        loop = compute_of(self.ctx).loop   # the engine's threads
        x, out = inputs[0], outputs[0]
        if self.reshape and x.flags.c_contiguous:   # e.g. NCHW -> NHWC of one channel
            return partial(np.copyto, out, x.reshape(out.shape))
        if self.narrow is not None and x.flags.c_contiguous and out.flags.c_contiguous:
            b, r, c = self.narrow
            src, dst = x.reshape(b, r, c), out.reshape(b, c, r)
            return sequence([loop("narrow_transpose", (src[i], dst[i]), c, r * c) for i in range(b)])
        pairs = wide_pairs(x, out, self.dims)
        step = self._compiled(*(pairs or (x, out)), self.dims[:x.ndim - (pairs is not None)])
        if step is not None:
            return step
        if self.swap is not None:
            return self._blocks(x, out)
        if self.split_last:
            src, out = inputs[0].transpose(self.dims), outputs[0]
            return sequence([partial(np.copyto, out[..., j], src[..., j]) for j in range(out.shape[-1])])
        if pairs is not None:
            x, out = pairs
        return partial(np.copyto, out, x.transpose(self.dims[:x.ndim]))

    def _compiled(self, x, out, dims):
        """The compiled permuted copy (_transpose_loops.permute4) of contiguous float32 `x` (or
        the 8-byte pairs of `wide_pairs`) into `out`, where the merged permutation has 2-4 axes
        and the loop is not slower than numpy's copy: out's rows contiguous in x, or long
        enough for its blocked gather (COMPILED_MIN_ROW), or the tensor small (COMPILED_MAX_SMALL:
        a Python call is most of the copy, and a chain takes the compiled step). Else None.
        Measured, one thread, per call: a MiniLM head transpose 1.7 -> 1.5 us; PicoDet's NHWC ->
        NCHW of 7600 x 10 33 -> 22 us (numpy in blocks), 7600 x 32 97 -> 82 us; the gathers of
        short rows (NCHW -> NHWC of many channels, 3136 x 112: 175 us numpy, 187 here) stay numpy's."""
        lib = op_loops("_transpose_loops")
        if lib is None or x.dtype not in (np.float32, np.int64) or out.dtype != x.dtype \
                or not (x.flags.c_contiguous and out.flags.c_contiguous) or x.size == 0:
            return None
        sizes, order = merged(x.shape, dims)
        if not 2 <= len(sizes) <= 4:
            return None
        view = x.reshape(sizes).transpose(order)
        pad = (1,) * (4 - view.ndim)   # unit axes before the last: out's rows stay its first axes
        shape4 = view.shape[:-1] + pad + view.shape[-1:]
        steps = [s // x.itemsize for s in view.strides]
        if steps[-1] != 1 and shape4[-1] < COMPILED_MIN_ROW and x.size > COMPILED_MAX_SMALL:
            return None
        steps = np.array(steps[:-1] + [0] * len(pad) + steps[-1:], np.int64)
        out4 = out.reshape(shape4)
        return compute_of(self.ctx).loop("permute4", (x.reshape(-1), steps, out4), shape4[0] * shape4[1],
                                         2 * x.size, lib=lib)

    def _blocks(self, x, out):
        if not (x.flags.c_contiguous and out.flags.c_contiguous):   # reshapes must be views
            return partial(np.copyto, out, x.transpose(self.dims))
        b, r, c = self.swap
        src, dst = x.reshape(b, r, c), out.reshape(b, c, r)
        return sequence([partial(np.copyto, dst[:, :, i:i + BLOCK_ROWS],
                                 src[:, i:i + BLOCK_ROWS].transpose(0, 2, 1))
                         for i in range(0, r, BLOCK_ROWS)])
