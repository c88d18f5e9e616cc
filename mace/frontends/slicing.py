"""Slicing with numpy's (= TensorFlow's and TFLite's) index semantics, shared by the NHWC frontends.

`dense_index` spreads an index (ints, slices, Ellipsis, None) over the input's axes,
`axis_bounds` turns one entry into (start, end, step) for StridedSlice, and
`slice_or_alias` emits the StridedSlice (+ Reshape) or aliases the input when nothing is cut.
The `ctx` is the frontend's mapping context (add, out, temp, alias, shape, fail).
"""
from __future__ import annotations

from mace.ops.strided_slice import axis_slice


def reshape_to(ctx, node, x, dims, out=None):
    """Reshape `x` to `dims` (TensorFlow's meaning: 0 is a real zero, -1 is inferred)."""
    ctx.add("Reshape", node, [x], None if out is None else [out],
            name=None if out is None else out, dims=[int(d) for d in dims],
            allowzero=1 if 0 in dims else None)


def slice_or_alias(ctx, node, x, bounds, final_shape):
    """StridedSlice `x` by per-axis (start, end, step) bounds, then reshape to `final_shape`."""
    shape = ctx.shape(x)
    cut = [i for i, (s, e, st) in enumerate(bounds) if (s, e, st) != (0, shape[i], 1)]
    src = x
    if cut:
        sliced = tuple(axis_slice(*b, d)[1] for b, d in zip(bounds, shape))
        direct = sliced == tuple(final_shape)  # no reshape needed after the slice
        src = ctx.out(node) if direct else ctx.temp(node, "slice")
        ctx.add("StridedSlice", node, [x], [src], name=node.name if direct else src,
                starts=[bounds[i][0] for i in cut], ends=[bounds[i][1] for i in cut], axes=cut,
                steps=[bounds[i][2] for i in cut])
        if direct:
            return
    if tuple(ctx.shape(src)) != tuple(final_shape):
        reshape_to(ctx, node, src, final_shape)
    else:
        ctx.alias(node, 0, src)


def dense_index(ctx, node, index, shape):
    """Per input axis: the slice or integer of `index` that applies to it."""
    consumed = sum(1 for e in index if e is not None and e is not Ellipsis)
    if consumed > len(shape):
        raise ctx.fail(node, f"indexes {consumed} axes of a rank-{len(shape)} input")
    dense = []
    for e in index:
        if e is Ellipsis:
            dense += [slice(None)] * (len(shape) - consumed)
        elif e is not None:
            dense.append(e)
    return dense + [slice(None)] * (len(shape) - len(dense))


def axis_bounds(ctx, node, e, dim):
    if isinstance(e, int):
        if not -dim <= e < dim:
            raise ctx.fail(node, f"index {e} is out of range for an axis of size {dim}")
        return e % dim, e % dim + 1, 1
    start, stop, step = e.indices(dim)
    if not len(range(start, stop, step)):
        return 0, 0, 1
    return start, (-dim - 1 if stop < 0 else stop), step  # -dim-1: past index 0 (negative step)
