"""Tensor plumbing with static shapes: RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, CONCATENATION,
PACK, UNPACK, SPLIT, SPLIT_V, SLICE, STRIDED_SLICE, GATHER, TILE, SHAPE.

TFLite's semantics are TensorFlow's (begin/end/strides and the five masks too): the mappings
are tf_common's, with their arguments read from the ops' options tables here.
"""
import numpy as np

from mace.frontends.slicing import reshape_to, slice_or_alias
from mace.frontends.tf_common.shape import (MASKS, axis_of, expand_axis, split_evenly, split_v, squeeze_axes,
                                            stack, strided_bounds, strided_index, unstack)
from mace.frontends.tflite.registry import tfl_op
from mace.ops.reshape import resolve_shape


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
    dims = [int(d) for d in op.options.SqueezeDimsAsNumpy()] \
        if op.options is not None and op.options.SqueezeDimsLength() else []
    squeeze_axes(ctx, op, dims)


@tfl_op("EXPAND_DIMS")
def expand_dims(ctx, op):
    expand_axis(ctx, op, "axis")


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
    stack(ctx, op, ctx.options(op).Axis())


@tfl_op("UNPACK")
def unpack(ctx, op):
    unstack(ctx, op, ctx.options(op).Axis())


@tfl_op("SPLIT")
def split(ctx, op):
    split_evenly(ctx, op, len(op.outputs))


tfl_op("SPLIT_V")(split_v)   # sizes in input 1, the axis in input 2: as TensorFlow's SplitV


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


@tfl_op("STRIDED_SLICE")
def strided_slice(ctx, op):
    opts = ctx.options(op)
    begin, end = ctx.static_ints(op, 1, "begin"), ctx.static_ints(op, 2, "end")
    if opts.Offset():   # end counts from begin
        end = [b + e for b, e in zip(begin, end)]
    masks = (opts.BeginMask(), opts.EndMask(), opts.EllipsisMask(), opts.NewAxisMask(), opts.ShrinkAxisMask())
    index = strided_index(ctx, op, begin, end, ctx.static_ints(op, 3, "strides"), dict(zip(MASKS, masks)))
    slice_or_alias(ctx, op, *strided_bounds(ctx, op, index))


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

