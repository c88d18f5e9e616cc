"""Tensor plumbing with static shapes: Reshape, Squeeze, ExpandDims, Transpose, ConcatV2,
Pack, Unpack, Split, SplitV, Slice, StridedSlice, Tile, GatherV2, and the shape
producers Shape, ShapeN, Size, Rank, Fill, ZerosLike, OnesLike, Range.

Every shape is static while converting (input shapes come from the deployment
file), so Shape/Size/Rank are constants at once and the Shape -> StridedSlice
-> Pack -> Reshape chains of Keras graphs fold into plain Reshape args.
"""
import numpy as np

from mace.frontends.slicing import reshape_to, slice_or_alias
from mace.frontends.tensorflow.registry import tf_op
from mace.frontends.tf_common.shape import (MASKS, axis_of, expand_axis, split_evenly, split_v, squeeze_axes,
                                            stack, strided_bounds, strided_index, unstack)
from mace.transform.passes.fold_constants import shape_depends_on_data
from mace.transform.passes.mark_ragged import ragged_tensors
from mace.transform.value_bounds import Bound, count_bound, value_bounds
from mace.ops.reshape import resolve_shape


@tf_op("Reshape")
def reshape(ctx, node):
    x = ctx.inp(node, 0)
    dims = ctx.static_ints(node, 1, "the target shape")
    try:
        reshape_to(ctx, node, x, resolve_shape(ctx.shape(x), dims, allowzero=True))
    except ValueError as e:
        raise ctx.fail(node, str(e)) from None


@tf_op("Squeeze")
def squeeze(ctx, node):
    squeeze_axes(ctx, node, ctx.attr(node, "squeeze_dims", []))


@tf_op("ExpandDims")
def expand_dims(ctx, node):
    expand_axis(ctx, node, "dim")


@tf_op("Transpose")
def transpose(ctx, node):
    ctx.add("Transpose", node, [ctx.inp(node, 0)], dims=ctx.static_ints(node, 1, "perm"))


def _concat(ctx, node, values, axis):
    if len(values) == 1:
        ctx.alias(node, 0, values[0])
        return
    ctx.add("Concat", node, values, axis=axis_of(ctx, node, axis, len(ctx.shape(values[0]))))


@tf_op("ConcatV2")
def concat_v2(ctx, node):
    inputs = ctx.inputs(node)
    _concat(ctx, node, inputs[:-1], ctx.static_ints(node, len(inputs) - 1, "axis")[0])


@tf_op("Concat")
def concat(ctx, node):
    _concat(ctx, node, ctx.inputs(node)[1:], ctx.static_ints(node, 0, "concat_dim")[0])


@tf_op("Pack")
def pack(ctx, node):
    stack(ctx, node, ctx.attr(node, "axis", 0))


@tf_op("Split")
def split(ctx, node):
    split_evenly(ctx, node, int(ctx.attr(node, "num_split")))


tf_op("SplitV")(split_v)


@tf_op("Unpack")
def unpack(ctx, node):
    unstack(ctx, node, ctx.attr(node, "axis", 0))


@tf_op("Slice")
def slice_(ctx, node):
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    begin, size = _slice_ints(ctx, node, x, 1, "begin"), _slice_ints(ctx, node, x, 2, "size")
    if len(begin) != len(shape) or len(size) != len(shape):
        raise ctx.fail(node, f"begin {begin} and size {size} must have {len(shape)} entries")
    bounds = []
    for b, n, d in zip(begin, size, shape):
        end = d if n == -1 or isinstance(n, Bound) else b + n
        if not 0 <= b <= end <= d:
            raise ctx.fail(node, f"begin {begin} and size {size} leave the input shape {list(shape)}")
        bounds.append((b, end, 1))
    counted = [a for a, n in enumerate(size) if isinstance(n, Bound)]
    if not counted:
        slice_or_alias(ctx, node, x, bounds, [e - b for b, e, _ in bounds])
        return
    # a size found at run time (no more than the rows there are): the numbers cut first, then the
    # first `size` rows are a Gather by Range(0, size), planned at the most the bounds allow
    (axis,) = counted
    cut, whole = x, [i for i, (b, e, _) in enumerate(bounds) if (b, e) != (0, shape[i])]
    if whole:
        cut = ctx.temp(node, "cut")
        ctx.add("StridedSlice", node, [x], [cut], name=cut, starts=[bounds[i][0] for i in whole],
                ends=[bounds[i][1] for i in whole], axes=whole, steps=[1] * len(whole))
    picked, count, first = ctx.temp(node, "picked"), ctx.temp(node, "count"), ctx.temp(node, "first")
    ctx.add("StridedSlice", node, [ctx.inp(node, 2)], [picked], name=picked, starts=[axis], ends=[axis + 1],
            axes=[0], steps=[1])
    reshape_to(ctx, node, picked, [], count)
    zero, one = (ctx.add_const(ctx.temp(node, n), np.array(v, ctx.dtype(count))) for n, v in (("zero", 0), ("one", 1)))
    ctx.add("Range", node, [zero, count, one], [first, ctx.temp(node, "length")], name=first,
            bound=int(min(size[axis].hi, ctx.shape(cut)[axis])))
    ctx.add("Gather", node, [cut, first], axis=axis)


def _slice_ints(ctx, node, x, i, what):
    """A Slice's begin or size; computed at run time, each entry must be known at convert from
    the bounds of what it is computed from (value_bounds): a number, or for a size, the input's
    own data-dependent length on that axis (-1: all its rows), or the Bound of a count of no
    rows or more (the first rows; one such axis, and from 0 on an axis of data-dependent length)."""
    if ctx.const(ctx.inp(node, i)) is not None:
        return ctx.static_ints(node, i, what)
    bounds = value_bounds(ctx.graph, ctx.inp(node, i))
    if bounds is None:
        raise ctx.fail(node, f"{what} must be static (computable from constants and input shapes), or follow "
                             f"from the bounds of a length found at run time")
    ragged = ragged_tensors(ctx.graph).get(x)
    ints = []
    for axis, b in enumerate(bounds.reshape(-1)):
        if b.exact:
            ints.append(int(b.lo))
        elif what == "size" and ragged and ragged[0] == axis and (b.length, b.scale, b.offset) == (ragged[1], 1, 0):
            ints.append(-1)
        elif what == "size" and b.lo >= 0 and not any(isinstance(n, Bound) for n in ints):
            ints.append(b)
        else:
            raise ctx.fail(node, f"{what} {list(bounds.reshape(-1))} is known only at run time (entry {axis}); "
                                 f"convert takes numbers, the input's own data-dependent length as a size, or "
                                 f"one size of no rows or more")
    return ints


@tf_op("StridedSlice")
def strided_slice(ctx, node):
    begin, end = ctx.static_ints(node, 1, "begin"), ctx.static_ints(node, 2, "end")
    index = strided_index(ctx, node, begin, end, ctx.static_ints(node, 3, "strides"),
                          {m: int(ctx.attr(node, m, 0)) for m in MASKS})
    slice_or_alias(ctx, node, *strided_bounds(ctx, node, index))


@tf_op("Tile")
def tile(ctx, node):
    ctx.add("Tile", node, [ctx.inp(node, 0)], repeats=ctx.static_ints(node, 1, "multiples"))


@tf_op("GatherV2", "Gather")
def gather(ctx, node):
    data, indices = ctx.inp(node, 0), ctx.inp(node, 1)
    if int(ctx.attr(node, "batch_dims", 0)):
        raise ctx.fail(node, "batch_dims is not supported")
    axis = ctx.static_ints(node, 2, "axis")[0] if node.op == "GatherV2" else 0
    ctx.add("Gather", node, [data, indices], axis=axis_of(ctx, node, axis, len(ctx.shape(data))))


# ---- static shape producers --------------------------------------------------------------
@tf_op("Shape")
def shape_(ctx, node):
    dtype = ctx.attr(node, "out_type", np.int32)
    x = ctx.inp(node, 0)
    if shape_depends_on_data(ctx.graph, x):   # rows NMS kept: the length the run finds (mark_ragged)
        found = ctx.temp(node, "int64")
        ctx.add("Shape", node, [x], [found], name=found)
        ctx.add("Cast", node, [found], to=np.dtype(dtype).name)
        return
    ctx.const_output(node, 0, np.array(ctx.shape(x), dtype))


@tf_op("ShapeN")
def shape_n(ctx, node):
    dtype = ctx.attr(node, "out_type", np.int32)
    for i, x in enumerate(ctx.inputs(node)):
        ctx.const_output(node, i, np.array(ctx.shape(x), dtype))


@tf_op("Size")
def size(ctx, node):
    x = ctx.inp(node, 0)
    if shape_depends_on_data(ctx.graph, x):   # the product of the shape the run finds
        found, count = ctx.temp(node, "shape"), ctx.temp(node, "count")
        ctx.add("Shape", node, [x], [found], name=found)
        ctx.add("Reduce", node, [found], [count], name=count, reduce_type="PROD", axis=[0], keepdims=0)
        ctx.add("Cast", node, [count], to=np.dtype(ctx.attr(node, "out_type", np.int32)).name)
        return
    ctx.const_output(node, 0, np.array(int(np.prod(ctx.shape(ctx.inp(node, 0)))),
                                       ctx.attr(node, "out_type", np.int32)))


@tf_op("Rank")
def rank(ctx, node):
    ctx.const_output(node, 0, np.array(len(ctx.shape(ctx.inp(node, 0))), np.int32))


@tf_op("ZerosLike", "OnesLike")
def zeros_like(ctx, node):
    x = ctx.inp(node, 0)
    fill = np.zeros if node.op == "ZerosLike" else np.ones
    if shape_depends_on_data(ctx.graph, x):
        # zeros as long as the rows NMS kept, not a constant of their bound (which would lose
        # their count): a Select of the value everywhere, element-wise over x
        ctx.add("Select", node, [ctx.add_const(ctx.temp(node, "everywhere"), np.ones((), np.bool_)),
                                 ctx.add_const(ctx.temp(node, "value"), fill((), ctx.dtype(x))), x])
        return
    ctx.const_output(node, 0, fill(ctx.shape(x), ctx.dtype(x)))


@tf_op("Fill")
def fill(ctx, node):
    dims = ctx.static_ints(node, 0, "dims")
    ctx.add("Expand", node, [ctx.inp(node, 1)], shape=dims)  # a scalar broadcast to dims


@tf_op("Range")
def range_(ctx, node):
    inputs = ctx.inputs(node)
    if all(ctx.const(t) is not None for t in inputs):
        ctx.add("Range", node, inputs)
        return
    # a limit computed at run time (range(min(100, rows NMS kept))): planned at the most values it
    # can give, how many it gave in a length tensor beside it
    found = [_scalar_bounds(ctx, node, t, what) for t, what in zip(inputs, ("start", "limit", "delta"))]
    bound = count_bound(*found)
    if bound is None:
        raise ctx.fail(node, f"delta {found[2]} must be a non-zero constant when the limit is computed at run time")
    ctx.add("Range", node, inputs, [ctx.out(node), ctx.temp(node, "length")], bound=bound)


def _scalar_bounds(ctx, node, tensor, what):
    b = value_bounds(ctx.graph, tensor)
    if b is None or b.size != 1:
        raise ctx.fail(node, f"{what} is computed at run time from ops whose bounds convert does not follow "
                             f"(it follows Shape, StridedSlice, Pack, Cast, Sub, Minimum, Greater, Select ...)")
    return b.reshape(-1)[0]
