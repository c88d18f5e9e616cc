"""ONNX pooling and normalisation across channels: MaxPool, AveragePool, Global*Pool, LRN."""
from mace.errors import ModelError
from mace.frontends.onnx.ops_conv import conv_padding_args, squeeze_h, unsqueeze_h
from mace.frontends.onnx.registry import onnx_op


def _pool(ctx, node, pooling_type):
    if len(node.output) > 1 and node.output[1]:
        raise ModelError(f"{node.op_type} '{ctx.op_name(node)}': the Indices output is not supported")
    kernel = list(ctx.attr(node, "kernel_shape"))
    spatial = len(kernel)
    if spatial not in (1, 2):
        raise ModelError(f"{node.op_type} '{ctx.op_name(node)}': only 1-D and 2-D pooling is supported")
    args = conv_padding_args(ctx, node, spatial)
    x = ctx.inp(node, 0)
    if spatial == 1:
        x, kernel = unsqueeze_h(ctx, node, x), [1] + kernel
    out = node.output[0] if spatial == 2 else ctx.temp(node, "y2d")
    ctx.add("Pooling", node, [x], [out], pooling_type=pooling_type, kernels=kernel,
            ceil_mode=int(ctx.attr(node, "ceil_mode", 0)),
            count_include_pad=int(ctx.attr(node, "count_include_pad", 0)), **args)
    if spatial == 1:
        squeeze_h(ctx, node, out, node.output[0])


@onnx_op("MaxPool")
def max_pool(ctx, node):
    _pool(ctx, node, "MAX")


@onnx_op("AveragePool")
def average_pool(ctx, node):
    _pool(ctx, node, "AVG")


def _global(ctx, node, reduce_type):
    x = ctx.inp(node, 0)
    axes = list(range(2, len(ctx.shape(x))))
    ctx.add("Reduce", node, [x], reduce_type=reduce_type, axis=axes, keepdims=1)


@onnx_op("GlobalAveragePool")
def global_average_pool(ctx, node):
    _global(ctx, node, "MEAN")


@onnx_op("GlobalMaxPool")
def global_max_pool(ctx, node):
    _global(ctx, node, "MAX")


@onnx_op("LRN")
def lrn(ctx, node):
    x = ctx.inp(node, 0)
    if len(ctx.shape(x)) != 4:
        raise ModelError(f"LRN '{ctx.op_name(node)}': only 4-D inputs are supported")
    ctx.add("LocalResponseNorm", node, [x], size=int(ctx.attr(node, "size")),
            alpha=float(ctx.attr(node, "alpha", 1e-4)), beta=float(ctx.attr(node, "beta", 0.75)),
            bias=float(ctx.attr(node, "bias", 1.0)), data_format="NCHW")
