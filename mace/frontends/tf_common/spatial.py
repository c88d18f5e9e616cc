"""Spatial ops with TensorFlow's semantics (Pad, PadV2, MirrorPad, ResizeBilinear,
ResizeNearestNeighbor, DepthToSpace, SpaceToDepth), for the TensorFlow and TFLite frontends
(tf_common/__init__.py).

Resize coordinates (align_corners / half_pixel_centers) map onto the resize ops'
coordinate_transformation_mode; nearest-neighbour rounding is TensorFlow's (floor, or
round-half-up with align_corners)."""
import numpy as np


def pad_by(ctx, node, pad_type, value=0.0):
    """Input 0 padded by input 1's [rank, 2] amounts (before, after per axis)."""
    x = ctx.inp(node, 0)
    rank = len(ctx.shape(x))
    amounts = ctx.static(node, 1, "paddings").astype(np.int64)
    if amounts.shape != (rank, 2):
        raise ctx.fail(node, f"paddings of shape {list(amounts.shape)}, expected [{rank}, 2]")
    ctx.add("Pad", node, [x], paddings=[int(v) for v in amounts[:, 0]] + [int(v) for v in amounts[:, 1]],
            pad_type=pad_type, constant_value=float(value))


def pad_constant(ctx, node):
    """PadV2's value to pad with: input 2, a scalar."""
    value = ctx.static(node, 2, "constant_values")
    if value.size != 1:
        raise ctx.fail(node, "constant_values must be a scalar")
    return value.reshape(-1)[0]


def resize_args(ctx, node, align, half):
    """(input, the resize ops' common args, align, half) for a resize to input 1's [h, w]."""
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise ctx.fail(node, f"only 4-D NHWC images are supported, got shape {list(shape)}")
    size = ctx.static_ints(node, 1, "size")
    if len(size) != 2 or min(size) <= 0:
        raise ctx.fail(node, f"size {size} must be two positive sizes")
    if align and half:
        raise ctx.fail(node, "align_corners and half_pixel_centers cannot both be set")
    scale = [float(np.float32(o) / np.float32(i)) for o, i in zip(size, shape[1:3])]
    return x, {"size": size, "scale": scale, "data_format": "NHWC"}, align, half


def resize_bilinear_to(ctx, node, align, half):
    x, args, align, half = resize_args(ctx, node, align, half)
    mode = "align_corners" if align else "half_pixel" if half else "asymmetric"
    ctx.add("ResizeBilinear", node, [x], coordinate_transformation_mode=mode, **args)


def resize_nearest_to(ctx, node, align, half):
    x, args, align, half = resize_args(ctx, node, align, half)
    if align:  # the scaled coordinate is rounded (halves up)
        mode, rounding = "align_corners", "round_prefer_ceil"
    else:      # and otherwise floored, after a half-pixel shift with half_pixel_centers
        mode, rounding = ("tf_half_pixel_for_nn" if half else "asymmetric"), "floor"
    ctx.add("ResizeNearestNeighbor", node, [x], coordinate_transformation_mode=mode,
            nearest_mode=rounding, **args)


def space_depth(ctx, node, op_type, block_size):
    # The NHWC channel order (block row, block column, channel) is DCR.
    ctx.add(op_type, node, [ctx.inp(node, 0)], block_size=int(block_size), mode="DCR", data_format="NHWC")
