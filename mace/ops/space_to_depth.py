"""SpaceToDepth: fold block_size x block_size spatial tiles into channels.

Args: block_size, mode (DCR, the default, or CRD (ONNX opset 28), each the
inverse of DepthToSpace in that mode; as defined on NCHW whatever the stored
layout), data_format. H and W must be divisible by block_size.
"""
from mace.ops._space_depth import SpaceDepthKernel, check_mode
from mace.ops.registry import REQUIRED, Layout, OpSpec, kernel, register_op


def plan(shape, b, mode, data_format):
    """(6-D input view, transpose, output shape) for one layout and mode."""
    check_mode(mode)
    nchw = data_format == "NCHW"
    n, c, h, w = shape if nchw else (shape[0], shape[3], shape[1], shape[2])
    if h % b or w % b:
        raise ValueError(f"spatial size {h}x{w} not divisible by block_size {b}")
    hb, wb = h // b, w // b
    if nchw:
        view = (n, c, hb, b, wb, b)
        perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        return view, perm, (n, c * b * b, hb, wb)
    view = (n, hb, b, wb, b, c)
    perm = (0, 1, 3, 2, 4, 5) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return view, perm, (n, hb, wb, c * b * b)


@register_op("SpaceToDepth", layout=Layout.FIXED)
class SpaceToDepth(OpSpec):
    attrs = {"block_size": REQUIRED, "data_format": "NHWC", "mode": "DCR"}

    @staticmethod
    def infer(ctx):
        _, _, out = plan(tuple(ctx.shapes[0]), int(ctx.arg("block_size")), ctx.arg("mode"),
                         ctx.arg("data_format"))
        return [(out, ctx.dtypes[0])]


@kernel("SpaceToDepth", "cpu")
class SpaceToDepthCpu(SpaceDepthKernel):
    plan = staticmethod(plan)
