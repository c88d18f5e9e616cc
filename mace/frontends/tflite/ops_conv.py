"""Convolutions, fully connected and pooling: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV,
FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D, and MediaPipe's custom Convolution2DTransposeBias.

Filters are converted to the IR's conventions once, here: CONV_2D (O, kh, kw, I) ->
OIHW, DEPTHWISE_CONV_2D (1, kh, kw, C*M) -> (C*M, 1, kh, kw), TRANSPOSE_CONV
(O, kh, kw, I) -> (I, O, kh, kw). TFLite's SAME padding puts the odd cell at the
end, which is the IR's SAME_UPPER. Fused activations become the ops' own
activation args.
"""
import numpy as np

from mace.frontends.tflite.registry import tfl_op

PADDING = {0: "SAME_UPPER", 1: "VALID"}   # tflite.Padding SAME, VALID


def padding(ctx, op, opts) -> str:
    p = int(opts.Padding())
    if p not in PADDING:
        raise ctx.fail(op, f"padding {p} is not supported (SAME and VALID are)")
    return PADDING[p]


def filter_of(ctx, op, i=1):
    w = ctx.const(ctx.inp(op, i))
    if w is None or w.ndim != 4:
        raise ctx.fail(op, "the filter must be a constant 4-D tensor")
    return np.asarray(w, np.float32)


def _with_bias(ctx, op, i, inputs):
    b = ctx.inp(op, i)
    return inputs + [b] if b is not None else inputs


@tfl_op("CONV_2D")
def conv2d(ctx, op):
    opts = ctx.options(op)
    x, w = ctx.inp(op, 0), filter_of(ctx, op)            # w: (O, kh, kw, C / group)
    channels = ctx.shape(x)[3]
    if channels % w.shape[3]:
        raise ctx.fail(op, f"{channels} input channels do not fit filter {list(w.shape)}")
    weight = ctx.add_const(ctx.temp(op, "filter"), np.ascontiguousarray(w.transpose(0, 3, 1, 2)))
    ctx.add("Conv2D", op, _with_bias(ctx, op, 2, [x, weight]), group=channels // w.shape[3],
            strides=[opts.StrideH(), opts.StrideW()],
            dilations=[opts.DilationHFactor(), opts.DilationWFactor()],
            padding=padding(ctx, op, opts), data_format="NHWC", **ctx.fused(op))


@tfl_op("DEPTHWISE_CONV_2D")
def depthwise_conv2d(ctx, op):
    opts = ctx.options(op)
    x, w = ctx.inp(op, 0), filter_of(ctx, op)            # w: (1, kh, kw, C * M)
    c = ctx.shape(x)[3]
    if w.shape[3] % c:
        raise ctx.fail(op, f"{c} input channels do not fit filter {list(w.shape)}")
    # Output channel c*M + m reads input channel c: the IR's (C*M, 1, kh, kw).
    weight = ctx.add_const(ctx.temp(op, "filter"), np.ascontiguousarray(w[0].transpose(2, 0, 1)[:, None]))
    ctx.add("DepthwiseConv2d", op, _with_bias(ctx, op, 2, [x, weight]),
            strides=[opts.StrideH(), opts.StrideW()],
            dilations=[opts.DilationHFactor(), opts.DilationWFactor()],
            padding=padding(ctx, op, opts), data_format="NHWC", **ctx.fused(op))


@tfl_op("TRANSPOSE_CONV")
def transpose_conv(ctx, op):
    opts = ctx.options(op)
    sizes = ctx.static_ints(op, 0, "output_shape")       # the result's NHWC shape
    w, x = filter_of(ctx, op), ctx.inp(op, 2)            # w: (O, kh, kw, I)
    if len(sizes) != 4 or ctx.shape(x)[3] != w.shape[3] or sizes[3] != w.shape[0]:
        raise ctx.fail(op, f"output_shape {sizes} and filter {list(w.shape)} do not fit the input "
                           f"{list(ctx.shape(x))}")
    strides = [opts.StrideH(), opts.StrideW()]
    pads, extra = _crop(ctx.shape(x), w.shape[1:3], strides, sizes, padding(ctx, op, opts))
    weight = ctx.add_const(ctx.temp(op, "filter"), np.ascontiguousarray(w.transpose(3, 0, 1, 2)))
    ctx.add("Deconv2D", op, _with_bias(ctx, op, 3, [x, weight]), strides=strides, dilations=[1, 1],
            pads=pads, output_padding=extra, group=1, data_format="NHWC", **ctx.fused(op))


def _crop(x_shape, kernel, strides, sizes, pad):
    """Cells cropped from the full transposed result (and added past it) to get `sizes`:
    TFLite crops half the surplus (rounded down) at the top/left with SAME, none with VALID."""
    top_left, bottom_right, extra = [], [], []
    for d in range(2):
        full = strides[d] * (x_shape[1 + d] - 1) + kernel[d]
        lead = max(full - sizes[1 + d], 0) // 2 if pad == "SAME_UPPER" else 0
        rest = full - lead - sizes[1 + d]
        top_left.append(lead)
        bottom_right.append(max(rest, 0))
        extra.append(max(-rest, 0))
    return top_left + bottom_right, extra


@tfl_op("FULLY_CONNECTED")
def fully_connected(ctx, op):
    opts = ctx.options(op)
    x = ctx.inp(op, 0)
    w = ctx.const(ctx.inp(op, 1))
    if w is None or w.ndim != 2:
        raise ctx.fail(op, "the weights must be a constant 2-D tensor (O, K)")
    weight = ctx.add_const(ctx.temp(op, "weight"), np.asarray(w, np.float32))
    shape = ctx.shape(x)
    k = w.shape[1]
    if int(np.prod(shape)) % k:
        raise ctx.fail(op, f"input {list(shape)} does not divide into rows of {k} features")
    if not opts.KeepNumDims() and len(shape) != 2:   # TFLite flattens to (rows, K) first
        flat = ctx.temp(op, "rows")
        ctx.add("Reshape", op, [x], [flat], name=flat, dims=[int(np.prod(shape)) // k, k])
        x = flat
    ctx.add("FullyConnected", op, _with_bias(ctx, op, 2, [x, weight]), **ctx.fused(op))


def _pool(ctx, op, kind):
    opts = ctx.options(op)
    act = ctx.fused(op)
    out = ctx.temp(op, "pooled") if act else ctx.out(op)
    # count_include_pad 0: TFLite's average divides by the cells inside the input only.
    ctx.add("Pooling", op, [ctx.inp(op, 0)], [out], name=out if act else None, pooling_type=kind,
            kernels=[opts.FilterHeight(), opts.FilterWidth()], strides=[opts.StrideH(), opts.StrideW()],
            padding=padding(ctx, op, opts), count_include_pad=0, data_format="NHWC")
    if act:
        ctx.add("Activation", op, [out], **act)


@tfl_op("AVERAGE_POOL_2D")
def average_pool(ctx, op):
    _pool(ctx, op, "AVG")


@tfl_op("MAX_POOL_2D")
def max_pool(ctx, op):
    _pool(ctx, op, "MAX")


@tfl_op("Convolution2DTransposeBias")
def mediapipe_transpose_conv(ctx, op):
    """MediaPipe's custom transposed conv with bias (its selfie segmentation models): inputs
    (x, filter (O, kh, kw, I), bias); the options are TFLite's C struct TfLiteTransposeConvParams
    (int32 padding: 1 SAME, 2 VALID; stride_width; stride_height)."""
    raw = op.custom_options
    if len(raw) < 12:
        raise ctx.fail(op, f"custom options of {len(raw)} bytes; expected padding and two strides")
    pad_code, stride_w, stride_h = (int(v) for v in np.frombuffer(raw[:12], "<i4"))
    if pad_code not in (1, 2):
        raise ctx.fail(op, f"padding {pad_code} is not supported (1 SAME, 2 VALID)")
    w, x = filter_of(ctx, op), ctx.inp(op, 0)            # w: (O, kh, kw, I)
    sizes = list(ctx.model.tensors[op.outputs[0]].shape)
    if len(sizes) != 4 or ctx.shape(x)[3] != w.shape[3] or sizes[3] != w.shape[0]:
        raise ctx.fail(op, f"output {sizes} and filter {list(w.shape)} do not fit the input "
                           f"{list(ctx.shape(x))}")
    strides = [stride_h, stride_w]
    pad = "SAME_UPPER" if pad_code == 1 else "VALID"
    pads, extra = _crop(ctx.shape(x), w.shape[1:3], strides, sizes, pad)
    weight = ctx.add_const(ctx.temp(op, "filter"), np.ascontiguousarray(w.transpose(3, 0, 1, 2)))
    ctx.add("Deconv2D", op, _with_bias(ctx, op, 2, [x, weight]), strides=strides, dilations=[1, 1],
            pads=pads, output_padding=extra, group=1, data_format="NHWC")
