"""Spatial ops: PAD, PADV2, MIRROR_PAD, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR,
DEPTH_TO_SPACE, SPACE_TO_DEPTH.

Resize coordinates (align_corners / half_pixel_centers, TensorFlow's flags)
map onto the resize ops' coordinate_transformation_mode; nearest-neighbour
rounding follows TFLite (floor, or round-half-up with align_corners).
"""
import numpy as np

from mace.frontends.tflite.registry import tfl_op


def _pad(ctx, op, pad_type, value=0.0):
    x = ctx.inp(op, 0)
    rank = len(ctx.shape(x))
    amounts = ctx.static(op, 1, "paddings").astype(np.int64)
    if amounts.shape != (rank, 2):
        raise ctx.fail(op, f"paddings of shape {list(amounts.shape)}, expected [{rank}, 2]")
    ctx.add("Pad", op, [x], paddings=[int(v) for v in amounts[:, 0]] + [int(v) for v in amounts[:, 1]],
            pad_type=pad_type, constant_value=float(value))


@tfl_op("PAD")
def pad(ctx, op):
    _pad(ctx, op, "CONSTANT")


@tfl_op("PADV2")
def pad_v2(ctx, op):
    value = ctx.static(op, 2, "constant_values")
    if value.size != 1:
        raise ctx.fail(op, "constant_values must be a scalar")
    _pad(ctx, op, "CONSTANT", value.reshape(-1)[0])


@tfl_op("MIRROR_PAD")
def mirror_pad(ctx, op):
    mode = int(ctx.options(op).Mode())   # tflite.MirrorPadMode: REFLECT 0, SYMMETRIC 1
    _pad(ctx, op, "SYMMETRIC" if mode else "REFLECT")


def _resize_args(ctx, op):
    x = ctx.inp(op, 0)
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise ctx.fail(op, f"only 4-D NHWC images are supported, got shape {list(shape)}")
    size = ctx.static_ints(op, 1, "size")
    if len(size) != 2 or min(size) <= 0:
        raise ctx.fail(op, f"size {size} must be two positive sizes")
    opts = op.options
    align = bool(opts.AlignCorners()) if opts is not None else False
    half = bool(opts.HalfPixelCenters()) if opts is not None else False
    if align and half:
        raise ctx.fail(op, "align_corners and half_pixel_centers cannot both be set")
    scale = [float(np.float32(o) / np.float32(i)) for o, i in zip(size, shape[1:3])]
    return x, {"size": size, "scale": scale, "data_format": "NHWC"}, align, half


@tfl_op("RESIZE_BILINEAR")
def resize_bilinear(ctx, op):
    x, args, align, half = _resize_args(ctx, op)
    mode = "align_corners" if align else "half_pixel" if half else "asymmetric"
    ctx.add("ResizeBilinear", op, [x], coordinate_transformation_mode=mode, **args)


@tfl_op("RESIZE_NEAREST_NEIGHBOR")
def resize_nearest(ctx, op):
    x, args, align, half = _resize_args(ctx, op)
    if align:   # the scaled coordinate is rounded (halves up)
        mode, rounding = "align_corners", "round_prefer_ceil"
    else:       # and otherwise floored, after a half-pixel shift with half_pixel_centers
        mode, rounding = ("tf_half_pixel_for_nn" if half else "asymmetric"), "floor"
    ctx.add("ResizeNearestNeighbor", op, [x], coordinate_transformation_mode=mode,
            nearest_mode=rounding, **args)


def _space_depth(ctx, op, op_type):
    # TFLite's NHWC channel order (block row, block column, channel) is DCR.
    ctx.add(op_type, op, [ctx.inp(op, 0)], block_size=int(ctx.options(op).BlockSize()), mode="DCR",
            data_format="NHWC")


@tfl_op("DEPTH_TO_SPACE")
def depth_to_space(ctx, op):
    _space_depth(ctx, op, "DepthToSpace")


@tfl_op("SPACE_TO_DEPTH")
def space_to_depth(ctx, op):
    _space_depth(ctx, op, "SpaceToDepth")
