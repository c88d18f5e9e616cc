"""Spatial ops: PAD, PADV2, MIRROR_PAD, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR,
DEPTH_TO_SPACE, SPACE_TO_DEPTH.

The mappings are tf_common's (TensorFlow's semantics: align_corners / half_pixel_centers,
nearest-neighbour rounding), with their flags read from the ops' options tables here.
"""
from mace.frontends.tf_common.spatial import pad_by, pad_constant, resize_bilinear_to, resize_nearest_to, space_depth
from mace.frontends.tflite.registry import tfl_op


@tfl_op("PAD")
def pad(ctx, op):
    pad_by(ctx, op, "CONSTANT")


@tfl_op("PADV2")
def pad_v2(ctx, op):
    pad_by(ctx, op, "CONSTANT", pad_constant(ctx, op))


@tfl_op("MIRROR_PAD")
def mirror_pad(ctx, op):
    mode = int(ctx.options(op).Mode())   # tflite.MirrorPadMode: REFLECT 0, SYMMETRIC 1
    pad_by(ctx, op, "SYMMETRIC" if mode else "REFLECT")


def _align_half(op):
    opts = op.options
    align = bool(opts.AlignCorners()) if opts is not None else False
    half = bool(opts.HalfPixelCenters()) if opts is not None else False
    return align, half


@tfl_op("RESIZE_BILINEAR")
def resize_bilinear(ctx, op):
    resize_bilinear_to(ctx, op, *_align_half(op))


@tfl_op("RESIZE_NEAREST_NEIGHBOR")
def resize_nearest(ctx, op):
    resize_nearest_to(ctx, op, *_align_half(op))


@tfl_op("DEPTH_TO_SPACE")
def depth_to_space(ctx, op):
    space_depth(ctx, op, "DepthToSpace", ctx.options(op).BlockSize())


@tfl_op("SPACE_TO_DEPTH")
def space_to_depth(ctx, op):
    space_depth(ctx, op, "SpaceToDepth", ctx.options(op).BlockSize())
