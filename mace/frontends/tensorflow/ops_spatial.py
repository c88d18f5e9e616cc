"""Spatial ops: Pad, PadV2, MirrorPad, ResizeBilinear, ResizeBicubic, ResizeNearestNeighbor,
SpaceToBatchND, BatchToSpaceND, DepthToSpace, SpaceToDepth.

Pads with constant paddings, resizes and DepthToSpace / SpaceToDepth are tf_common's mappings
(shared with TFLite), their attributes read here; paddings found at run time, ResizeBicubic and
the block ops are TensorFlow's own.
SpaceToBatchND -> conv -> BatchToSpaceND (how TensorFlow spells a dilated
conv) is folded into one dilated conv by the flatten_atrous_conv pass.
"""
import numpy as np

from mace.frontends.tensorflow.ops_conv import require_nhwc
from mace.frontends.tensorflow.registry import tf_op
from mace.frontends.tf_common.spatial import (pad_by, pad_constant, resize_args, resize_bilinear_to,
                                              resize_nearest_to, space_depth)
from mace.transform.passes.mark_ragged import ragged_tensors
from mace.transform.value_bounds import value_bounds


def _pad(ctx, node, pad_type, value=0.0):
    x = ctx.inp(node, 0)
    if ctx.const(ctx.inp(node, 1)) is None:
        _pad_to_size(ctx, node, x, len(ctx.shape(x)), pad_type, value)
        return
    pad_by(ctx, node, pad_type, value)


def _pad_to_size(ctx, node, x, rank, pad_type, value):
    """Paddings computed at run time: TensorFlow's Object Detection API pads the rows NMS kept,
    n of them, to a fixed count with [[0, 100 - n], [0, 0]]. Convert follows the bounds of the
    paddings (value_bounds): each must be a number, but the end of the axis whose length depends
    on the data, which may be `size - that length` (size no smaller than the rows it can have):
    a RaggedToDense to `size` rows (zeros after the length), then a Pad of the numbers."""
    bounds = value_bounds(ctx.graph, ctx.inp(node, 1))
    if bounds is None or bounds.shape != (rank, 2):
        raise ctx.fail(node, "paddings must be static (computable from constants and input shapes), or "
                             "follow from the bounds of a length found at run time")
    ragged = ragged_tensors(ctx.graph).get(x)
    amounts, src = [[0, 0] for _ in range(rank)], x
    for axis in range(rank):
        for side in range(2):
            b = bounds[axis, side]
            if b.exact:
                amounts[axis][side] = int(b.lo)
                continue
            to_size = side == 1 and ragged and ragged[0] == axis and b.length == ragged[1] and b.scale == -1
            planned = ctx.shape(x)[axis]
            if not to_size or b.offset < planned:
                raise ctx.fail(node, f"paddings {bounds.tolist()} are known only at run time (axis {axis}); "
                                     f"convert takes numbers, or `size - n` after an axis of n rows found at run "
                                     f"time (n up to {planned} here, so size >= {planned})")
            if pad_type != "CONSTANT" or value != 0:
                raise ctx.fail(node, f"a pad to a fixed size after rows found at run time pads with zeros, "
                                     f"not {pad_type} {value}")
            src = ctx.temp(node, "dense")
            ctx.add("RaggedToDense", node, [x, ragged[1]], [src], name=src, axis=axis, size=int(b.offset))
    if not any(a for pair in amounts for a in pair):
        ctx.alias(node, 0, src)
        return
    ctx.add("Pad", node, [src], paddings=[a for a, _ in amounts] + [e for _, e in amounts], pad_type=pad_type,
            constant_value=float(value))


@tf_op("Pad")
def pad(ctx, node):
    _pad(ctx, node, "CONSTANT")


@tf_op("PadV2")
def pad_v2(ctx, node):
    _pad(ctx, node, "CONSTANT", pad_constant(ctx, node))


@tf_op("MirrorPad")
def mirror_pad(ctx, node):
    mode = ctx.attr(node, "mode", "REFLECT")
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise ctx.fail(node, f"mode '{mode}' is not supported (REFLECT and SYMMETRIC are)")
    _pad(ctx, node, mode)


def _align_half(ctx, node):
    return bool(ctx.attr(node, "align_corners", False)), bool(ctx.attr(node, "half_pixel_centers", False))


@tf_op("ResizeBilinear")
def resize_bilinear(ctx, node):
    resize_bilinear_to(ctx, node, *_align_half(ctx, node))


@tf_op("ResizeBicubic")
def resize_bicubic(ctx, node):
    x, args, align, half = resize_args(ctx, node, *_align_half(ctx, node))
    mode = "align_corners" if align else "half_pixel" if half else "asymmetric"
    # TensorFlow's half-pixel kernel is Keys' a = -0.5 with taps outside the image dropped and
    # the rest renormalised; its legacy kernel is a = -0.75 with the edge repeated; both read
    # their weights from a 1024-step table
    ctx.add("ResizeBicubic", node, [x], coordinate_transformation_mode=mode,
            cubic_coeff_a=-0.5 if half else -0.75, exclude_outside=int(half), weight_steps=1024, **args)


@tf_op("ResizeNearestNeighbor")
def resize_nearest(ctx, node):
    resize_nearest_to(ctx, node, *_align_half(ctx, node))


def _block(ctx, node, what):
    x = ctx.inp(node, 0)
    block = ctx.static_ints(node, 1, "block_shape")
    amounts = ctx.static(node, 2, what).astype(np.int64)
    if len(ctx.shape(x)) != 4 or len(block) != 2 or amounts.shape != (2, 2):
        raise ctx.fail(node, f"only 4-D inputs with a 2-D block are supported (input "
                             f"{list(ctx.shape(x))}, block_shape {block})")
    if amounts.min() < 0:
        raise ctx.fail(node, f"{what} {amounts.tolist()} must not be negative")
    # [[top, bottom], [left, right]] -> the IR's [top, left, bottom, right]
    return x, block, [int(amounts[0, 0]), int(amounts[1, 0]), int(amounts[0, 1]), int(amounts[1, 1])]


@tf_op("SpaceToBatchND")
def space_to_batch(ctx, node):
    x, block, pads = _block(ctx, node, "paddings")
    ctx.add("SpaceToBatchND", node, [x], block_shape=block, paddings=pads, data_format="NHWC")


@tf_op("BatchToSpaceND")
def batch_to_space(ctx, node):
    x, block, crops = _block(ctx, node, "crops")
    ctx.add("BatchToSpaceND", node, [x], block_shape=block, crops=crops, data_format="NHWC")


def _space_depth(ctx, node, op_type):
    require_nhwc(ctx, node)
    space_depth(ctx, node, op_type, ctx.attr(node, "block_size"))


@tf_op("DepthToSpace")
def depth_to_space(ctx, node):
    _space_depth(ctx, node, "DepthToSpace")


@tf_op("SpaceToDepth")
def space_to_depth(ctx, node):
    _space_depth(ctx, node, "SpaceToDepth")
