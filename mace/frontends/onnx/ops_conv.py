"""ONNX Conv -> Conv2D / DepthwiseConv2d (1-D convs run as 2-D with H = 1)."""
from mace.errors import ModelError
from mace.frontends.onnx.registry import onnx_op


def conv_padding_args(ctx, node, spatial: int) -> dict:
    """strides, dilations, pads/padding args shared by Conv, ConvTranspose and pooling."""
    auto_pad = ctx.attr(node, "auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    strides = list(ctx.attr(node, "strides", [1] * spatial))
    dilations = list(ctx.attr(node, "dilations", [1] * spatial))
    pads = list(ctx.attr(node, "pads", [0] * 2 * spatial))
    if spatial == 1:  # run as 2-D with a unit H axis
        strides, dilations, pads = [1] + strides, [1] + dilations, [0, pads[0], 0, pads[1]]
    args = {"strides": strides, "dilations": dilations, "data_format": "NCHW"}
    if auto_pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        args["padding"] = auto_pad
    else:
        args["pads"] = pads
    return args


def unsqueeze_h(ctx, node, x):
    """(N, C, L) -> (N, C, 1, L) for 1-D ops."""
    n, c, length = ctx.shape(x)
    out = ctx.temp(node, "2d")
    ctx.add("Reshape", node, [x], [out], name=out, dims=[n, c, 1, length])
    return out


def squeeze_h(ctx, node, y4, y):
    n, c, _, length = ctx.shape(y4)
    ctx.add("Reshape", node, [y4], [y], name=ctx.temp(node, "1d"), dims=[n, c, length])


@onnx_op("Conv")
def conv(ctx, node):
    x, w, b = ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2)
    weight = ctx.const(w)
    if weight is None:
        raise ModelError(f"Conv '{ctx.op_name(node)}': the filter must be a constant initializer")
    spatial = weight.ndim - 2
    if spatial not in (1, 2):
        raise ModelError(f"Conv '{ctx.op_name(node)}': only 1-D and 2-D convolutions are supported, "
                         f"got {spatial}-D")
    args = conv_padding_args(ctx, node, spatial)
    if spatial == 1:
        x = unsqueeze_h(ctx, node, x)
        w = ctx.add_const(ctx.temp(node, "w2d"), weight[:, :, None, :])
    group = int(ctx.attr(node, "group", 1))
    channels = ctx.shape(x)[1]
    inputs = [x, w] + ([b] if b else [])
    out = node.output[0] if spatial == 2 else ctx.temp(node, "y2d")
    if group > 1 and group == channels and weight.shape[1] == 1:
        ctx.add("DepthwiseConv2d", node, inputs, [out], **args)
    else:
        ctx.add("Conv2D", node, inputs, [out], group=group, **args)
    if spatial == 1:
        squeeze_h(ctx, node, out, node.output[0])
