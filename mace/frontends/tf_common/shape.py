"""Tensor plumbing with TensorFlow's semantics (Squeeze, ExpandDims, Pack, Unpack, Split, SplitV,
StridedSlice), for the TensorFlow and TFLite frontends (tf_common/__init__.py)."""
import numpy as np

from mace.frontends.slicing import axis_bounds, dense_index, reshape_to
from mace.ops._common import normalize_axis


def axis_of(ctx, node, axis, rank):
    try:
        return normalize_axis(int(axis), rank)
    except ValueError as e:
        raise ctx.fail(node, str(e)) from None


def squeeze_axes(ctx, node, dims):
    """Drop axes `dims` (all the size-1 axes when none are given)."""
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    axes = {axis_of(ctx, node, a, len(shape)) for a in dims} or {i for i, d in enumerate(shape) if d == 1}
    if any(shape[a] != 1 for a in axes):
        raise ctx.fail(node, f"cannot squeeze axes {sorted(axes)} of shape {list(shape)}")
    reshape_to(ctx, node, x, [d for i, d in enumerate(shape) if i not in axes])


def expand_axis(ctx, node, what):
    """A size-1 axis inserted where input 1 (called `what` in errors) says."""
    x = ctx.inp(node, 0)
    shape = list(ctx.shape(x))
    dim = ctx.static_ints(node, 1, what)
    if len(dim) != 1:
        raise ctx.fail(node, f"{what} {dim} must be one axis")
    shape.insert(axis_of(ctx, node, dim[0], len(shape) + 1), 1)
    reshape_to(ctx, node, x, shape)


def stack(ctx, node, axis):
    """Pack: the inputs stacked along a new axis `axis`."""
    values = ctx.inputs(node)
    shape = list(ctx.shape(values[0]))
    axis = axis_of(ctx, node, axis, len(shape) + 1)
    grown = shape[:axis] + [1] + shape[axis:]
    if len(values) == 1:
        reshape_to(ctx, node, values[0], grown)
        return
    parts = []
    for i, v in enumerate(values):
        parts.append(ctx.temp(node, f"part{i}"))
        reshape_to(ctx, node, v, grown, parts[-1])
    ctx.add("Concat", node, parts, axis=axis)


def unstack(ctx, node, axis):
    """Unpack: one output per index of axis `axis`, the axis dropped."""
    x = ctx.inp(node, 0)
    shape = list(ctx.shape(x))
    axis = axis_of(ctx, node, axis, len(shape))
    parts = [ctx.temp(node, f"part{i}") for i in range(shape[axis])]
    ctx.add("Split", node, [x], parts, name=ctx.temp(node, "split"), axis=axis, split=[1] * len(parts))
    for i, p in enumerate(parts):
        reshape_to(ctx, node, p, shape[:axis] + shape[axis + 1:], ctx.out(node, i))


def split_sizes(ctx, node, x, axis, sizes):
    dim = ctx.shape(x)[axis]
    if sum(sizes) != dim or min(sizes) < 0:
        raise ctx.fail(node, f"sizes {sizes} do not cut axis {axis} (size {dim})")
    ctx.add("Split", node, [x], [ctx.out(node, i) for i in range(len(sizes))], axis=axis, split=sizes)


def split_evenly(ctx, node, n):
    """Split: input 1 cut into `n` equal parts along the axis input 0 gives."""
    x = ctx.inp(node, 1)
    axis = axis_of(ctx, node, ctx.static_ints(node, 0, "axis")[0], len(ctx.shape(x)))
    dim = ctx.shape(x)[axis]
    if dim % n:
        raise ctx.fail(node, f"axis {axis} of size {dim} does not split evenly into {n}")
    split_sizes(ctx, node, x, axis, [dim // n] * n)


def split_v(ctx, node):
    """SplitV: sizes in input 1 (one of them may be -1: the rest), the axis in input 2."""
    x = ctx.inp(node, 0)
    axis = axis_of(ctx, node, ctx.static_ints(node, 2, "axis")[0], len(ctx.shape(x)))
    sizes = ctx.static_ints(node, 1, "size_splits")
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = ctx.shape(x)[axis] - (sum(sizes) + 1)
    split_sizes(ctx, node, x, axis, sizes)


MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def strided_index(ctx, node, begin, end, strides, mask):
    """StridedSlice's begin / end / strides and its five masks (`mask`: MASKS -> int) as a numpy
    index, which has the same semantics."""
    if 0 in strides:
        raise ctx.fail(node, f"strides {strides} contain 0")
    if bin(mask["ellipsis_mask"]).count("1") > 1:
        raise ctx.fail(node, "more than one ellipsis")
    index = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if mask["ellipsis_mask"] & bit:
            index.append(Ellipsis)
        elif mask["new_axis_mask"] & bit:
            index.append(None)
        elif mask["shrink_axis_mask"] & bit:
            index.append(b)
        else:
            index.append(slice(None if mask["begin_mask"] & bit else b,
                               None if mask["end_mask"] & bit else e, s))
    return index


def strided_bounds(ctx, node, index):
    """StridedSlice of input 0 by a numpy index (strided_index): slice_or_alias's arguments (the
    mapping calls it, so that docs/ops.md's table finds the Reshape it may add)."""
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    bounds = [axis_bounds(ctx, node, e, d) for e, d in zip(dense_index(ctx, node, index, shape), shape)]
    # numpy indexing has TensorFlow's semantics; a zero-stride view gives the result's shape.
    final = np.broadcast_to(np.empty((), np.int8), shape)[tuple(index)].shape
    return x, bounds, final
