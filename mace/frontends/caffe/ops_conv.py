"""Caffe Convolution, Deconvolution, InnerProduct -> Conv2D / DepthwiseConv2d, Deconv2D,
FullyConnected (with Reshapes around it when Caffe flattens from `axis`)."""
import numpy as np

from mace.frontends.caffe.registry import caffe_layer


def _pair(ctx, layer, values, h_field, w_field, default, what):
    """[h, w] from a repeated field (one value or one per axis) or its _h/_w fields."""
    p = layer.convolution_param
    has_hw = p.HasField(h_field) or p.HasField(w_field)
    if has_hw:
        if values:
            raise ctx.fail(layer, f"give {what} or {h_field}/{w_field}, not both")
        if what != "pad" and not (p.HasField(h_field) and p.HasField(w_field)):
            raise ctx.fail(layer, f"{h_field} and {w_field} go together")
        return [int(getattr(p, h_field)), int(getattr(p, w_field))]
    if not values:
        if default is None:
            raise ctx.fail(layer, f"no {what} given")
        return [default, default]
    if len(values) not in (1, 2):
        raise ctx.fail(layer, f"{what} has {len(values)} values; 2-D convolution takes 1 or 2")
    return [int(values[0]), int(values[-1])]


def conv_params(ctx, layer):
    """(kernel, strides, pads, dilations, group, num_output, bias_term) of a (de)convolution."""
    p = layer.convolution_param
    x = ctx.inp(layer)
    if len(ctx.shape(x)) != 4:
        raise ctx.fail(layer, f"only 2-D convolution of 4-D NCHW blobs is supported, input has "
                              f"shape {list(ctx.shape(x))}")
    if p.axis != 1:
        raise ctx.fail(layer, f"axis {p.axis} is not supported (channels must be axis 1)")
    kernel = _pair(ctx, layer, list(p.kernel_size), "kernel_h", "kernel_w", None, "kernel_size")
    strides = _pair(ctx, layer, list(p.stride), "stride_h", "stride_w", 1, "stride")
    pads = _pair(ctx, layer, list(p.pad), "pad_h", "pad_w", 0, "pad")
    dil = list(p.dilation) or [1]
    if len(dil) not in (1, 2):
        raise ctx.fail(layer, f"dilation has {len(dil)} values; 2-D convolution takes 1 or 2")
    dilations = [int(dil[0]), int(dil[-1])]
    if min(kernel) < 1 or min(strides) < 1 or min(dilations) < 1:
        raise ctx.fail(layer, f"kernel {kernel}, stride {strides} and dilation {dilations} "
                              f"must be positive")
    group, num_output = int(p.group), int(p.num_output)
    channels = ctx.shape(x)[1]
    if num_output < 1:
        raise ctx.fail(layer, "num_output must be given (and positive)")
    if group < 1 or channels % group or num_output % group:
        raise ctx.fail(layer, f"num_output {num_output} and {channels} input channels must both "
                              f"divide into group {group}")
    return kernel, strides, pads, dilations, group, num_output, bool(p.bias_term)


def _geometry_args(strides, pads, dilations):
    return {"strides": strides, "dilations": dilations, "pads": [pads[0], pads[1], pads[0], pads[1]],
            "data_format": "NCHW"}


def _weights(ctx, layer, w_shape, bias_term, num_output):
    count = 1 + int(bias_term)
    w = ctx.new_const(layer, "weight", ctx.weight(layer, 0, w_shape, count))
    if not bias_term:
        return [w]
    return [w, ctx.new_const(layer, "bias", ctx.weight(layer, 1, (num_output,), count))]


@caffe_layer("Convolution")
def convolution(ctx, layer):
    kernel, strides, pads, dilations, group, num_output, bias_term = conv_params(ctx, layer)
    x = ctx.inp(layer)
    channels = ctx.shape(x)[1]
    weights = _weights(ctx, layer, (num_output, channels // group, *kernel), bias_term, num_output)
    args = _geometry_args(strides, pads, dilations)
    if group > 1 and group == channels:  # one input channel per group
        ctx.add("DepthwiseConv2d", layer, [x] + weights, **args)
    else:
        ctx.add("Conv2D", layer, [x] + weights, group=group, **args)


@caffe_layer("Deconvolution")
def deconvolution(ctx, layer):
    kernel, strides, pads, dilations, group, num_output, bias_term = conv_params(ctx, layer)
    x = ctx.inp(layer)
    channels = ctx.shape(x)[1]
    # Caffe stores a deconvolution filter input-channel first, as ConvTranspose does.
    weights = _weights(ctx, layer, (channels, num_output // group, *kernel), bias_term, num_output)
    ctx.add("Deconv2D", layer, [x] + weights, group=group, **_geometry_args(strides, pads, dilations))


@caffe_layer("InnerProduct")
def inner_product(ctx, layer):
    p = layer.inner_product_param
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    axis = ctx.axis(layer, p.axis, len(shape))
    k, n = int(np.prod(shape[axis:])), int(p.num_output)
    if n < 1:
        raise ctx.fail(layer, "num_output must be positive")
    count = 1 + int(p.bias_term)
    if p.transpose:  # stored (K, N): the FC weight is its transpose
        w = np.ascontiguousarray(ctx.weight(layer, 0, (k, n), count).T)
    else:
        w = ctx.weight(layer, 0, (n, k), count)
    inputs = [ctx.new_const(layer, "weight", w)]
    if p.bias_term:
        inputs.append(ctx.new_const(layer, "bias", ctx.weight(layer, 1, (n,), count)))
    if len(shape) != axis + 1:  # Caffe flattens every axis from `axis` on
        flat = ctx.temp(layer, "flat")
        ctx.add("Reshape", layer, [x], [flat], name=flat, dims=[*shape[:axis], k])
        x = flat
    ctx.add("FullyConnected", layer, [x] + inputs)
