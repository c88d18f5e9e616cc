"""Convolutions and pooling: Conv2D, DepthwiseConv2dNative, Conv2DBackpropInput, BiasAdd,
MaxPool, MaxPoolV2, AvgPool.

Filters are converted to the IR's conventions once, here: Conv2D HWIO -> OIHW,
depthwise (kh, kw, C, M) -> (C*M, 1, kh, kw), transposed conv (kh, kw, C_out,
C_in) -> (C_in, C_out, kh, kw). TensorFlow's SAME padding puts the odd cell at
the end, which is the IR's SAME_UPPER. Only the NHWC data_format (TensorFlow's
CPU layout) is supported.
"""
import numpy as np

from mace.frontends.tensorflow.registry import tf_op


def require_nhwc(ctx, node):
    fmt = ctx.attr(node, "data_format", "NHWC")
    if fmt != "NHWC":
        raise ctx.fail(node, f"data_format {fmt} is not supported (NHWC is, TensorFlow's CPU layout)")


def spatial(ctx, node, name, values=None):
    """[h, w] of an NHWC 4-vector attribute (strides, dilations, ksize); N and C must be 1."""
    v = list(values if values is not None else ctx.attr(node, name, [1, 1, 1, 1]))
    if len(v) != 4 or v[0] != 1 or v[3] != 1:
        raise ctx.fail(node, f"{name} {v}: only H and W may differ from 1")
    return [int(v[1]), int(v[2])]


def padding_args(ctx, node) -> dict:
    padding = ctx.attr(node, "padding", "VALID")
    if padding == "SAME":
        return {"padding": "SAME_UPPER"}  # TensorFlow pads the odd cell at the bottom/right
    if padding == "VALID":
        return {"padding": "VALID"}
    if padding == "EXPLICIT":
        p = [int(v) for v in ctx.attr(node, "explicit_paddings", [])]
        if len(p) != 8 or any(p[:2]) or any(p[6:]):
            raise ctx.fail(node, f"explicit_paddings {p}: only H and W may be padded")
        return {"pads": [p[2], p[4], p[3], p[5]]}
    raise ctx.fail(node, f"padding '{padding}' is not supported")


def conv_args(ctx, node) -> dict:
    require_nhwc(ctx, node)
    return {"strides": spatial(ctx, node, "strides"), "dilations": spatial(ctx, node, "dilations"),
            "data_format": "NHWC", **padding_args(ctx, node)}


def constant_filter(ctx, node, i):
    w = ctx.const(ctx.inp(node, i))
    if w is None or w.ndim != 4:
        raise ctx.fail(node, "the filter must be a constant 4-D tensor")
    return np.asarray(w)


@tf_op("Conv2D")
def conv2d(ctx, node):
    args = conv_args(ctx, node)
    x = ctx.inp(node, 0)
    w = constant_filter(ctx, node, 1)                      # (kh, kw, C / group, O)
    channels = ctx.shape(x)[3]
    if channels % w.shape[2]:
        raise ctx.fail(node, f"{channels} input channels do not fit filter {list(w.shape)}")
    weight = ctx.add_const(ctx.temp(node, "filter"), np.ascontiguousarray(w.transpose(3, 2, 0, 1)))
    ctx.add("Conv2D", node, [x, weight], group=channels // w.shape[2], **args)


@tf_op("DepthwiseConv2dNative")
def depthwise_conv2d(ctx, node):
    args = conv_args(ctx, node)
    x = ctx.inp(node, 0)
    w = constant_filter(ctx, node, 1)                      # (kh, kw, C, M)
    kh, kw, c, m = w.shape
    if ctx.shape(x)[3] != c:
        raise ctx.fail(node, f"{ctx.shape(x)[3]} input channels do not fit filter {list(w.shape)}")
    # Output channel c*M + m reads input channel c: the IR's (C*M, 1, kh, kw).
    filt = w.reshape(kh, kw, c * m).transpose(2, 0, 1)[:, None]
    weight = ctx.add_const(ctx.temp(node, "filter"), np.ascontiguousarray(filt))
    ctx.add("DepthwiseConv2d", node, [x, weight], **args)


@tf_op("Conv2DBackpropInput")
def conv2d_transpose(ctx, node):
    args = conv_args(ctx, node)
    sizes = ctx.static_ints(node, 0, "input_sizes")        # the result's NHWC shape
    w = constant_filter(ctx, node, 1)                      # (kh, kw, C_out, C_in)
    x = ctx.inp(node, 2)
    if len(sizes) != 4 or ctx.shape(x)[3] != w.shape[3] or sizes[3] != w.shape[2]:
        raise ctx.fail(node, f"input_sizes {sizes} and filter {list(w.shape)} do not fit the input "
                             f"{list(ctx.shape(x))}")
    pads, extra = _crop(ctx, node, args, ctx.shape(x), w.shape, sizes)
    weight = ctx.add_const(ctx.temp(node, "filter"), np.ascontiguousarray(w.transpose(3, 2, 0, 1)))
    ctx.add("Deconv2D", node, [x, weight], strides=args["strides"], dilations=args["dilations"],
            pads=pads, output_padding=extra, group=1, data_format="NHWC")


def _crop(ctx, node, args, x_shape, w_shape, sizes):
    """Cells cropped from the full transposed result (and cells added past it) to get `sizes`.

    The result's top/left crop is the forward conv's top/left pad; the rest of the
    difference is cropped at the bottom/right, or added there when negative.
    """
    top_left, bottom_right, extra = [], [], []
    for d in range(2):
        s, dil, k = args["strides"][d], args["dilations"][d], w_shape[d]
        full = s * (x_shape[1 + d] - 1) + (k - 1) * dil + 1
        target = sizes[1 + d]
        if "pads" in args:
            lead = args["pads"][d]
        elif args["padding"] == "SAME_UPPER":
            lead = max(full - target, 0) // 2
        else:
            lead = 0
        rest = full - lead - target
        top_left.append(lead)
        bottom_right.append(max(rest, 0))
        extra.append(max(-rest, 0))
    return top_left + bottom_right, extra


@tf_op("BiasAdd", "BiasAddV1")
def bias_add(ctx, node):
    x, b = ctx.inp(node, 0), ctx.inp(node, 1)
    if ctx.attr(node, "data_format", "NHWC") == "NCHW":
        value = ctx.const(b)
        if value is None or len(ctx.shape(x)) < 3:
            raise ctx.fail(node, "NCHW needs a constant bias and an input of rank >= 3")
        rank = len(ctx.shape(x))
        b = ctx.add_const(ctx.temp(node, "bias"), value.reshape((-1,) + (1,) * (rank - 2)))
    ctx.add("Eltwise", node, [x, b], type="SUM")  # fold_batchnorm folds it into the conv


def _pool(ctx, node, kind, ksize, strides):
    require_nhwc(ctx, node)
    # count_include_pad 0: TensorFlow's AvgPool divides by the cells inside the input only.
    ctx.add("Pooling", node, [ctx.inp(node, 0)], pooling_type=kind,
            kernels=spatial(ctx, node, "ksize", ksize), strides=spatial(ctx, node, "strides", strides),
            count_include_pad=0, data_format="NHWC", **padding_args(ctx, node))


@tf_op("MaxPool", "AvgPool")
def pool(ctx, node):
    _pool(ctx, node, "MAX" if node.op == "MaxPool" else "AVG", ctx.attr(node, "ksize"),
          ctx.attr(node, "strides"))


@tf_op("MaxPoolV2")
def max_pool_v2(ctx, node):
    _pool(ctx, node, "MAX", ctx.static_ints(node, 1, "ksize"), ctx.static_ints(node, 2, "strides"))
