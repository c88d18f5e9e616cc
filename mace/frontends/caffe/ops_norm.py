"""Caffe BatchNorm, Scale, Bias -> BatchNorm (per-channel scale and offset, which
fold_batchnorm merges into the convolution before it) or broadcasting Eltwise.

Caffe's BatchNorm keeps running sums: blobs are mean * f, variance * f and f
(the moving-average scale factor); the statistics are blob / f (0 when f is 0).
Its affine part is a separate Scale layer (bias_term: true), usually in place.
"""
import numpy as np

from mace.frontends.caffe.registry import caffe_layer


@caffe_layer("BatchNorm")
def batch_norm(ctx, layer):
    p = layer.batch_norm_param
    if p.HasField("use_global_stats") and not p.use_global_stats:
        raise ctx.fail(layer, "use_global_stats: false normalises with the statistics of each "
                              "batch; only inference with the stored statistics is supported")
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    channels = shape[1] if len(shape) > 1 else 1
    mean, var = (ctx.weight(layer, i, (channels,), 3).astype(np.float64) for i in (0, 1))
    stored = float(ctx.weight(layer, 2, (1,), 3)[0])
    factor = 0.0 if stored == 0 else 1.0 / stored
    scale = 1.0 / np.sqrt(var * factor + float(p.eps))
    offset = -mean * factor * scale
    _per_channel(ctx, layer, x, scale, offset)


def _per_channel(ctx, layer, x, scale, offset):
    s = ctx.new_const(layer, "scale", np.asarray(scale, np.float32))
    o = ctx.new_const(layer, "offset", np.asarray(offset, np.float32))
    ctx.add("BatchNorm", layer, [x, s, o], data_format="NCHW")


def _operand_axes(ctx, layer, shape, axis, num_axes):
    """Axes [axis, axis + n) of `shape` a learned scale / bias covers (Caffe's num_axes rules)."""
    axis = ctx.axis(layer, axis, len(shape))
    if num_axes < -1:
        raise ctx.fail(layer, f"num_axes {num_axes} must be -1 or more")
    end = len(shape) if num_axes == -1 else axis + num_axes
    if end > len(shape):
        raise ctx.fail(layer, f"axis {axis} + num_axes {num_axes} go past the input's "
                              f"{len(shape)} axes")
    return axis, tuple(shape[axis:end])


def _broadcast(value_shape, axis, rank):
    """Shape that lines a blob of `value_shape`, starting at `axis`, up with a rank-`rank` input."""
    return tuple(value_shape) + (1,) * (rank - axis - len(value_shape))


def _second_bottom(ctx, layer, x_shape, axis):
    """(tensor, axis, shape) of the operand given as bottom[1], reshaped to broadcast
    against bottom[0]; a 0-D operand is a scalar whatever the axis."""
    y = ctx.inp(layer, 1)
    y_shape = tuple(ctx.shape(y))
    axis = 0 if not y_shape else ctx.axis(layer, axis, len(x_shape))
    if tuple(x_shape[axis:axis + len(y_shape)]) != y_shape:
        raise ctx.fail(layer, f"bottom[1] shape {list(y_shape)} does not match bottom[0] "
                              f"{list(x_shape)} from axis {axis}")
    target = _broadcast(y_shape, axis, len(x_shape))
    if target != y_shape:
        out = ctx.temp(layer, "aligned")
        ctx.add("Reshape", layer, [y], [out], name=out, dims=list(target))
        y = out
    return y, axis, y_shape


def _apply(ctx, layer, x, operand_chain):
    """Run Eltwise (kind, operand) steps on x; the last writes the layer's top."""
    for i, (kind, operand) in enumerate(operand_chain):
        last = i == len(operand_chain) - 1
        out = ctx.out(layer) if last else ctx.temp(layer, kind.lower())
        ctx.add("Eltwise", layer, [x, operand], [out], name=None if last else out, type=kind)
        x = out


@caffe_layer("Scale")
def scale(ctx, layer):
    p = layer.scale_param
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    count = int(len(layer.bottom) == 1) + int(p.bias_term)
    if len(layer.bottom) == 2:
        factor, axis, covered = _second_bottom(ctx, layer, shape, p.axis)
        factor_value = None
    else:
        axis, covered = _operand_axes(ctx, layer, shape, p.axis, p.num_axes)
        factor, factor_value = None, ctx.weight(layer, 0, covered, count)
    bias = ctx.weight(layer, count - 1, covered, count) if p.bias_term else None
    if factor_value is not None and axis == 1 and len(covered) == 1 and len(shape) >= 2:
        _per_channel(ctx, layer, x, factor_value, np.zeros(covered) if bias is None else bias)
        return
    target = _broadcast(covered, axis, len(shape))
    if factor is None:
        factor = ctx.new_const(layer, "scale", factor_value.reshape(target))
    chain = [("PROD", factor)]
    if bias is not None:
        chain.append(("SUM", ctx.new_const(layer, "bias", bias.reshape(target))))
    _apply(ctx, layer, x, chain)


@caffe_layer("Bias")
def bias(ctx, layer):
    p = layer.bias_param
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    if len(layer.bottom) == 2:
        operand = _second_bottom(ctx, layer, shape, p.axis)[0]
    else:
        axis, covered = _operand_axes(ctx, layer, shape, p.axis, p.num_axes)
        value = ctx.weight(layer, 0, covered, 1)
        operand = ctx.new_const(layer, "bias", value.reshape(_broadcast(covered, axis, len(shape))))
    _apply(ctx, layer, x, [("SUM", operand)])
