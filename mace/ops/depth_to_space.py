"""DepthToSpace: move channel blocks into block_size x block_size spatial tiles.

Args: block_size, mode (DCR, default, or CRD; as ONNX defines them on NCHW,
whatever the stored layout), data_format. C must be divisible by block_size^2.
"""
from mace.ops._space_depth import SpaceDepthKernel, check_mode
from mace.ops.registry import REQUIRED, Layout, OpSpec, kernel, register_op


def plan(shape, b, mode, data_format):
    """(6-D input view, transpose, output shape) for one layout and mode."""
    check_mode(mode)
    if data_format == "NCHW":
        n, c, h, w = shape
        if c % (b * b):
            raise ValueError(f"channels {c} not divisible by block_size^2 = {b * b}")
        cb = c // (b * b)
        view, perm = ((n, b, b, cb, h, w), (0, 3, 4, 1, 5, 2)) if mode == "DCR" else \
            ((n, cb, b, b, h, w), (0, 1, 4, 2, 5, 3))
        return view, perm, (n, cb, h * b, w * b)
    n, h, w, c = shape
    if c % (b * b):
        raise ValueError(f"channels {c} not divisible by block_size^2 = {b * b}")
    cb = c // (b * b)
    view, perm = ((n, h, w, b, b, cb), (0, 1, 3, 2, 4, 5)) if mode == "DCR" else \
        ((n, h, w, cb, b, b), (0, 1, 4, 2, 5, 3))
    return view, perm, (n, h * b, w * b, cb)


@register_op("DepthToSpace", layout=Layout.FIXED)
class DepthToSpace(OpSpec):
    attrs = {"block_size": REQUIRED, "data_format": "NHWC", "mode": "DCR"}

    @staticmethod
    def infer(ctx):
        _, _, out = plan(tuple(ctx.shapes[0]), int(ctx.arg("block_size")), ctx.arg("mode"),
                         ctx.arg("data_format"))
        return [(out, ctx.dtypes[0])]


@kernel("DepthToSpace", "cpu")
class DepthToSpaceCpu(SpaceDepthKernel):
    plan = staticmethod(plan)
