"""Tensor plumbing with static shapes: RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, CONCATENATION,
PACK, UNPACK, SPLIT, SPLIT_V, SLICE, STRIDED_SLICE, GATHER, TILE, SHAPE.

TFLite's slicing semantics are TensorFlow's (begin/end/strides and the five masks),
so the TensorFlow frontend's index helpers do the work here too.
"""
import numpy as np

from mace.frontends.slicing import axis_bounds, dense_index, slice_or_alias
from mace.frontends.tflite.registry import tfl_op
from mace.ops._common import normalize_axis
from mace.ops.reshape import resolve_shape


def reshape_to(ctx, op, x, dims, out=None):
    ctx.add("Reshape", op, [x], None if out is None else [out], name=out, dims=[int(d) for d in dims],
            allowzero=1 if 0 in dims else None)


def axis_of(ctx, op, axis, rank):
    try:
        return normalize_axis(int(axis), rank)
    except ValueError as e:
        raise ctx.fail(op, str(e)) from None


@tfl_op("RESHAPE")
def reshape(ctx, op):
    x = ctx.inp(op, 0)
    if ctx.inp(op, 1) is not None and ctx.const(ctx.inp(op, 1)) is not None:
        dims = ctx.static_ints(op, 1, "the target shape")
    elif op.options is not None and op.options.NewShapeLength():
        dims = [int(d) for d in op.options.NewShapeAsNumpy()]
    else:   # the converter wrote the shape only on the output tensor
        dims = list(ctx.model.tensors[op.outputs[0]].shape)
    try:
        reshape_to(ctx, op, x, resolve_shape(ctx.shape(x), dims, allowzero=True))
    except ValueError as e:
        raise ctx.fail(op, str(e)) from None


@tfl_op("SQUEEZE")
def squeeze(ctx, op):
    x = ctx.inp(op, 0)
    shape = ctx.shape(x)
    dims = [int(d) for d in op.options.SqueezeDimsAsNumpy()] \
        if op.options is not None and op.options.SqueezeDimsLength() else []
    axes = {axis_of(ctx, op, a, len(shape)) for a in dims} or {i for i, d in enumerate(shape) if d == 1}
    if any(shape[a] != 1 for a in axes):
        raise ctx.fail(op, f"cannot squeeze axes {sorted(axes)} of shape {list(shape)}")
    reshape_to(ctx, op, x, [d for i, d in enumerate(shape) if i not in axes])


@tfl_op("EXPAND_DIMS")
def expand_dims(ctx, op):
    x = ctx.inp(op, 0)
    shape = list(ctx.shape(x))
    dim = ctx.static_ints(op, 1, "axis")
    if len(dim) != 1:
        raise ctx.fail(op, f"axis {dim} must be one axis")
    shape.insert(axis_of(ctx, op, dim[0], len(shape) + 1), 1)
    reshape_to(ctx, op, x, shape)


@tfl_op("TRANSPOSE")
def transpose(ctx, op):
    ctx.add("Transpose", op, [ctx.inp(op, 0)], dims=ctx.static_ints(op, 1, "perm"))


@tfl_op("CONCATENATION")
def concatenation(ctx, op):
    values = ctx.inputs(op)
    axis = axis_of(ctx, op, ctx.options(op).Axis(), len(ctx.shape(values[0])))
    act = ctx.fused(op)
    if len(values) == 1 and not act:
        ctx.alias(op, 0, values[0])
        return
    out = ctx.temp(op, "joined") if act else None
    ctx.add("Concat", op, values, None if out is None else [out], name=out, axis=axis)
    if act:
        ctx.add("Activation", op, [out], **act)


@tfl_op("PACK")
def pack(ctx, op):
    values = ctx.inputs(op)
    shape = list(ctx.shape(values[0]))
    axis = axis_of(ctx, op, ctx.options(op).Axis(), len(shape) + 1)
    grown = shape[:axis] + [1] + shape[axis:]
    if len(values) == 1:
        reshape_to(ctx, op, values[0], grown)
        return
    parts = []
    for i, v in enumerate(values):
        parts.append(ctx.temp(op, f"part{i}"))
        reshape_to(ctx, op, v, grown, parts[-1])
    ctx.add("Concat", op, parts, axis=axis)


@tfl_op("UNPACK")
def unpack(ctx, op):
    x = ctx.inp(op, 0)
    shape = list(ctx.shape(x))
    axis = axis_of(ctx, op, ctx.options(op).Axis(), len(shape))
    parts = [ctx.temp(op, f"part{i}") for i in range(shape[axis])]
    ctx.add("Split", op, [x], parts, name=ctx.temp(op, "split"), axis=axis, split=[1] * len(parts))
    for i, p in enumerate(parts):
        reshape_to(ctx, op, p, shape[:axis] + shape[axis + 1:], ctx.out(op, i))


def _split(ctx, op, x, axis, sizes):
    dim = ctx.shape(x)[axis]
    if sum(sizes) != dim or min(sizes) < 0:
        raise ctx.fail(op, f"sizes {sizes} do not cut axis {axis} (size {dim})")
    ctx.add("Split", op, [x], [ctx.out(op, i) for i in range(len(sizes))], axis=axis, split=sizes)


@tfl_op("SPLIT")
def split(ctx, op):
    x = ctx.inp(op, 1)
    axis = axis_of(ctx, op, ctx.static_ints(op, 0, "axis")[0], len(ctx.shape(x)))
    n, dim = len(op.outputs), ctx.shape(x)[axis]
    if dim % n:
        raise ctx.fail(op, f"axis {axis} of size {dim} does not split evenly into {n}")
    _split(ctx, op, x, axis, [dim // n] * n)


@tfl_op("SPLIT_V")
def split_v(ctx, op):
    x = ctx.inp(op, 0)
    axis = axis_of(ctx, op, ctx.static_ints(op, 2, "axis")[0], len(ctx.shape(x)))
    sizes = ctx.static_ints(op, 1, "size_splits")
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = ctx.shape(x)[axis] - (sum(sizes) + 1)
    _split(ctx, op, x, axis, sizes)


@tfl_op("SLICE")
def slice_(ctx, op):
    x = ctx.inp(op, 0)
    shape = ctx.shape(x)
    begin, size = ctx.static_ints(op, 1, "begin"), ctx.static_ints(op, 2, "size")
    if len(begin) != len(shape) or len(size) != len(shape):
        raise ctx.fail(op, f"begin {begin} and size {size} must have {len(shape)} entries")
    bounds = []
    for b, n, d in zip(begin, size, shape):
        end = d if n == -1 else b + n
        if not 0 <= b <= end <= d:
            raise ctx.fail(op, f"begin {begin} and size {size} leave the input shape {list(shape)}")
        bounds.append((b, end, 1))
    slice_or_alias(ctx, op, x, bounds, [e - b for b, e, _ in bounds])


def strided_index(ctx, op):
    """begin/end/strides and masks (TensorFlow's semantics) as a numpy index."""
    opts = ctx.options(op)
    begin, end = ctx.static_ints(op, 1, "begin"), ctx.static_ints(op, 2, "end")
    strides = ctx.static_ints(op, 3, "strides")
    if opts.Offset():   # end counts from begin
        end = [b + e for b, e in zip(begin, end)]
    if 0 in strides:
        raise ctx.fail(op, f"strides {strides} contain 0")
    if bin(opts.EllipsisMask()).count("1") > 1:
        raise ctx.fail(op, "more than one ellipsis")
    index = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if opts.EllipsisMask() & bit:
            index.append(Ellipsis)
        elif opts.NewAxisMask() & bit:
            index.append(None)
        elif opts.ShrinkAxisMask() & bit:
            index.append(b)
        else:
            index.append(slice(None if opts.BeginMask() & bit else b,
                               None if opts.EndMask() & bit else e, s))
    return index


@tfl_op("STRIDED_SLICE")
def strided_slice(ctx, op):
    x = ctx.inp(op, 0)
    shape = ctx.shape(x)
    index = strided_index(ctx, op)
    bounds = [axis_bounds(ctx, op, e, d) for e, d in zip(dense_index(ctx, op, index, shape), shape)]
    # numpy indexing has TFLite's semantics; a zero-stride view gives the result's shape.
    final = np.broadcast_to(np.empty((), np.int8), shape)[tuple(index)].shape
    slice_or_alias(ctx, op, x, bounds, final)


@tfl_op("GATHER")
def gather(ctx, op):
    data, indices = ctx.inp(op, 0), ctx.inp(op, 1)
    opts = ctx.options(op)
    if int(opts.BatchDims()):
        raise ctx.fail(op, "batch_dims is not supported")
    ctx.add("Gather", op, [data, indices], axis=axis_of(ctx, op, opts.Axis(), len(ctx.shape(data))))


@tfl_op("TILE")
def tile(ctx, op):
    ctx.add("Tile", op, [ctx.inp(op, 0)], repeats=ctx.static_ints(op, 1, "multiples"))


@tfl_op("SHAPE")
def shape_(ctx, op):
    dtype = ctx.model.tensors[op.outputs[0]].dtype or np.int32
    value = ctx.add_const(ctx.temp(op, "value"), np.array(ctx.shape(ctx.inp(op, 0)), dtype))
    ctx.add("Identity", op, [value])   # folds at once unless the shape is a model output

