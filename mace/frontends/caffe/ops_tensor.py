"""Caffe blob plumbing and per-blob math: Eltwise, Concat, Slice, Split, Softmax, Flatten,
Reshape, Dropout, Crop, Permute, ArgMax. Every shape is static, so sizes become op args."""
import numpy as np

from mace.frontends.caffe.caffe_pb2 import EltwiseParameter
from mace.frontends.caffe.registry import caffe_layer

ELTWISE = {EltwiseParameter.SUM: "SUM", EltwiseParameter.PROD: "PROD", EltwiseParameter.MAX: "MAX"}


@caffe_layer("Eltwise")
def eltwise(ctx, layer):
    p = layer.eltwise_param
    inputs = ctx.inputs(layer)
    shapes = {tuple(ctx.shape(t)) for t in inputs}
    if len(shapes) != 1:
        raise ctx.fail(layer, f"bottoms differ in shape: {sorted(list(s) for s in shapes)}")
    coeff = list(p.coeff)
    if coeff and p.operation != EltwiseParameter.SUM:
        raise ctx.fail(layer, "coeff is only allowed with operation SUM")
    if coeff and len(coeff) != len(inputs):
        raise ctx.fail(layer, f"{len(coeff)} coeff values for {len(inputs)} bottoms")
    if len(inputs) == 1 and not coeff:
        ctx.add("Identity", layer, inputs)
        return
    if any(c != 1 for c in coeff):
        inputs = [_scaled(ctx, layer, t, c, i) for i, (t, c) in enumerate(zip(inputs, coeff))]
    if len(inputs) == 1:
        ctx.add("Identity", layer, inputs)
        return
    ctx.add("Eltwise", layer, inputs, type=ELTWISE[p.operation])


def _scaled(ctx, layer, t, c, i):
    """coeff * t (t itself when the coeff is 1)."""
    if c == 1:
        return t
    out = ctx.temp(layer, f"coeff{i}")
    ctx.add("Eltwise", layer, [t, ctx.new_const(layer, f"c{i}", np.float32(c))], [out], name=out,
            type="PROD")
    return out


@caffe_layer("Concat")
def concat(ctx, layer):
    p = layer.concat_param
    inputs = ctx.inputs(layer)
    rank = len(ctx.shape(inputs[0]))
    axis = int(p.concat_dim) if p.HasField("concat_dim") else ctx.axis(layer, p.axis, rank)
    if not 0 <= axis < rank:
        raise ctx.fail(layer, f"concat_dim {axis} is out of range for a {rank}-D input")
    if len(inputs) == 1:
        ctx.add("Identity", layer, inputs)
        return
    ctx.add("Concat", layer, inputs, axis=axis)


@caffe_layer("Slice")
def slice_(ctx, layer):
    p = layer.slice_param
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    axis = int(p.slice_dim) if p.HasField("slice_dim") else ctx.axis(layer, p.axis, len(shape))
    if not 0 <= axis < len(shape):
        raise ctx.fail(layer, f"slice_dim {axis} is out of range for a {len(shape)}-D input")
    dim, n = shape[axis], len(layer.top)
    points = [int(v) for v in p.slice_point]
    if points:
        if len(points) != n - 1 or points != sorted(points) or points[0] <= 0 or points[-1] >= dim:
            raise ctx.fail(layer, f"slice_point {points} must be {n - 1} increasing cut(s) inside "
                                  f"axis {axis} of size {dim}")
        sizes = list(np.diff([0] + points + [dim]))
    else:
        if dim % n:
            raise ctx.fail(layer, f"axis {axis} of size {dim} does not split evenly into {n} tops")
        sizes = [dim // n] * n
    if n == 1:
        ctx.add("Identity", layer, [x])
        return
    ctx.add("Split", layer, [x], axis=axis, split=[int(s) for s in sizes])


@caffe_layer("Split")
def split(ctx, layer):
    x = ctx.inp(layer)
    for i in range(len(layer.top)):  # every top is a copy of the bottom
        ctx.add("Identity", layer, [x], [ctx.out(layer, i)], name=ctx.temp(layer, f"copy{i}"))


@caffe_layer("Dropout")
def dropout(ctx, layer):
    ctx.add("Identity", layer, [ctx.inp(layer)])  # inference: Caffe copies the input


@caffe_layer("Softmax")
def softmax(ctx, layer):
    x = ctx.inp(layer)
    ctx.add("Softmax", layer, [x], axis=ctx.axis(layer, layer.softmax_param.axis, len(ctx.shape(x))))


def _reshape(ctx, layer, dims):
    ctx.add("Reshape", layer, [ctx.inp(layer)], dims=[int(d) for d in dims])


@caffe_layer("Flatten")
def flatten(ctx, layer):
    p = layer.flatten_param
    shape = ctx.shape(ctx.inp(layer))
    start = ctx.axis(layer, p.axis, len(shape))
    end = ctx.axis(layer, p.end_axis, len(shape), "end_axis")
    if end < start:
        raise ctx.fail(layer, f"end_axis {p.end_axis} comes before axis {p.axis}")
    _reshape(ctx, layer, [*shape[:start], int(np.prod(shape[start:end + 1])), *shape[end + 1:]])


@caffe_layer("Reshape")
def reshape(ctx, layer):
    p = layer.reshape_param
    shape = list(ctx.shape(ctx.inp(layer)))
    rank = len(shape)
    # axis counts positions between axes: -1 is after the last one.
    start = int(p.axis) if p.axis >= 0 else rank + int(p.axis) + 1
    if not 0 <= start <= rank:
        raise ctx.fail(layer, f"axis {p.axis} is out of range for a {rank}-D input")
    end = rank if p.num_axes == -1 else start + int(p.num_axes)
    if p.num_axes < -1 or end > rank:
        raise ctx.fail(layer, f"num_axes {p.num_axes} from axis {start} does not fit a {rank}-D input")
    dims = [int(d) for d in p.shape.dim]
    if dims.count(-1) > 1:
        raise ctx.fail(layer, f"shape {dims} has more than one -1")
    middle = []
    for i, d in enumerate(dims):
        if d == 0:  # copy the input's size at that position
            if start + i >= rank:
                raise ctx.fail(layer, f"shape {dims}: dim {i} is 0 but the input has no axis "
                                      f"{start + i}")
            d = shape[start + i]
        middle.append(d)
    out = shape[:start] + middle + shape[end:]
    total, known = int(np.prod(shape)), int(np.prod([d for d in out if d != -1]))
    if -1 in out:
        if known == 0 or total % known:
            raise ctx.fail(layer, f"cannot infer the -1 in {out} from {total} elements")
        out[out.index(-1)] = total // known
    if int(np.prod(out)) != total:
        raise ctx.fail(layer, f"cannot reshape {shape} ({total} elements) into {out}")
    _reshape(ctx, layer, out)


@caffe_layer("Crop")
def crop(ctx, layer):
    """Crop bottom[0] to bottom[1]'s size on axes from `axis` on, starting at `offset`."""
    p = layer.crop_param
    if len(layer.bottom) != 2:
        raise ctx.fail(layer, "needs two bottoms (the blob to crop and one of the target size)")
    x = ctx.inp(layer)
    shape, ref = ctx.shape(x), ctx.shape(ctx.inp(layer, 1))
    if len(shape) != len(ref):
        raise ctx.fail(layer, f"bottoms have different ranks: {list(shape)} and {list(ref)}")
    start = ctx.axis(layer, p.axis, len(shape))
    offsets = [int(v) for v in p.offset]
    cropped = len(shape) - start
    if len(offsets) not in (0, 1, cropped):
        raise ctx.fail(layer, f"{len(offsets)} offsets for {cropped} cropped axes (give 0, 1 or "
                              f"{cropped})")
    offsets = offsets * cropped if len(offsets) == 1 else offsets or [0] * cropped
    axes = list(range(start, len(shape)))
    for a, off in zip(axes, offsets):
        if off + ref[a] > shape[a]:
            raise ctx.fail(layer, f"axis {a}: offset {off} + size {ref[a]} exceeds {shape[a]}")
    ctx.add("StridedSlice", layer, [x], starts=offsets, ends=[o + ref[a] for a, o in zip(axes, offsets)],
            axes=axes, steps=[1] * len(axes))


@caffe_layer("Permute")
def permute(ctx, layer):
    """SSD's Permute: `order` lists the leading output axes; the rest follow in order."""
    x = ctx.inp(layer)
    rank = len(ctx.shape(x))
    order = [int(o) for o in layer.permute_param.order]
    if len(set(order)) != len(order) or any(o >= rank for o in order):
        raise ctx.fail(layer, f"order {order} must name distinct axes of a {rank}-D input")
    dims = order + [a for a in range(rank) if a not in order]
    if dims == list(range(rank)):
        ctx.add("Identity", layer, [x])
        return
    ctx.add("Transpose", layer, [x], dims=dims)


@caffe_layer("ArgMax")
def arg_max(ctx, layer):
    """Index (as float, like every Caffe blob) or value of the maximum; ties pick the last index."""
    p = layer.argmax_param
    if p.top_k != 1:
        raise ctx.fail(layer, f"top_k {p.top_k} is not supported (only 1)")
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    if p.HasField("axis"):
        axis = ctx.axis(layer, p.axis, len(shape))
        if p.out_max_val:  # values only
            ctx.add("Reduce", layer, [x], reduce_type="MAX", axis=[axis], keepdims=1)
        else:
            _float_argmax(ctx, layer, x, axis, ctx.out(layer))
        return
    # No axis: each sample flattened; output (N, 1 or 2, 1, ...) of rank max(rank, 3).
    n = shape[0]
    flat = ctx.temp(layer, "flat")
    ctx.add("Reshape", layer, [x], [flat], name=flat, dims=[n, int(np.prod(shape[1:]))])
    tail = [1] * (max(len(shape), 3) - 2)
    index = ctx.temp(layer, "index")
    _float_argmax(ctx, layer, flat, 1, index)
    if p.out_max_val:
        value = ctx.temp(layer, "value")
        ctx.add("Reduce", layer, [flat], [value], name=value, reduce_type="MAX", axis=[1], keepdims=1)
        pair = ctx.temp(layer, "pair")
        ctx.add("Concat", layer, [index, value], [pair], name=pair, axis=1)
        ctx.add("Reshape", layer, [pair], dims=[n, 2, *tail])
    else:
        ctx.add("Reshape", layer, [index], dims=[n, 1, *tail])


def _float_argmax(ctx, layer, x, axis, out):
    index = ctx.temp(layer, "argmax")
    # Caffe sorts (value, index) pairs descending: among equal values the larger index wins.
    ctx.add("ArgMax", layer, [x], [index], name=index, axis=axis, keepdims=1, select_last_index=1)
    ctx.add("Cast", layer, [index], [out], name=ctx.temp(layer, "cast"), to="float32")
