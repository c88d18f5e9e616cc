"""ONNX spatial ops: ConvTranspose, Resize, Upsample, DepthToSpace, SpaceToDepth, Pad,
InstanceNormalization.

Every size, scale and pad amount must be static (a constant, or computable from
constants and input shapes): they become op arguments, so the kernels can
precompute their tables at load.
"""
import numpy as np

from mace.errors import ModelError
from mace.frontends.onnx.ops_conv import conv_padding_args, squeeze_h, unsqueeze_h
from mace.frontends.onnx.ops_tensor import static_ints
from mace.frontends.onnx.registry import onnx_op
from mace.ops._resize import COORDINATE_MODES


def _fail(ctx, node, message):
    return ModelError(f"{node.op_type} '{ctx.op_name(node)}': {message}")


def _str_attr(ctx, node, name, default):
    value = ctx.attr(node, name, default)
    return value.decode() if isinstance(value, bytes) else value


def _static_input(ctx, node, i, what):
    """Constant value of optional input i (None when absent or empty)."""
    name = ctx.inp(node, i)
    if name is None:
        return None
    value = ctx.const(name)
    if value is None:
        raise _fail(ctx, node, f"{what} must be static (computable from constants and input shapes)")
    value = np.asarray(value)
    return value if value.size else None


def _require_4d(ctx, node, x):
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise _fail(ctx, node, f"only 4-D NCHW inputs are supported, got shape {list(shape)}")
    return shape


# ---- ConvTranspose ----------------------------------------------------------
@onnx_op("ConvTranspose")
def conv_transpose(ctx, node):
    x, w, b = ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2)
    weight = ctx.const(w)
    if weight is None:
        raise _fail(ctx, node, "the filter must be a constant initializer")
    spatial = weight.ndim - 2
    if spatial not in (1, 2):
        raise _fail(ctx, node, f"only 1-D and 2-D transposed convolutions are supported, "
                               f"got {spatial}-D")
    args = conv_padding_args(ctx, node, spatial)
    extra = list(ctx.attr(node, "output_padding", [0] * spatial))
    target = list(ctx.attr(node, "output_shape", []))[-spatial:]  # old opsets may list N, C too
    if spatial == 1:  # run as 2-D with a unit H axis
        x = unsqueeze_h(ctx, node, x)
        w = ctx.add_const(ctx.temp(node, "w2d"), weight[:, :, None, :])
        extra, target = [0] + extra, [1] + target if target else []
    group = int(ctx.attr(node, "group", 1))
    if ctx.shape(x)[1] != weight.shape[0] or weight.shape[0] % group:
        raise _fail(ctx, node, f"filter shape {list(weight.shape)} does not fit {ctx.shape(x)[1]} "
                               f"input channels in {group} group(s)")
    out = node.output[0] if spatial == 2 else ctx.temp(node, "y2d")
    ctx.add("Deconv2D", node, [x, w] + ([b] if b else []), [out], group=group,
            output_padding=extra, output_shape=target or None, **args)
    if spatial == 1:
        squeeze_h(ctx, node, out, node.output[0])


# ---- Resize / Upsample -------------------------------------------------------
def _output_and_scales(ctx, node, shape, scales, sizes):
    """Per-axis output sizes and coordinate scales for all 4 axes (float32 like onnxruntime)."""
    axes = ctx.attr(node, "axes", None)
    axes = list(range(4)) if axes is None else [a % 4 for a in axes]
    full_scales, full_sizes = [1.0] * 4, list(shape)
    if sizes is not None:
        if sizes.size != len(axes):
            raise _fail(ctx, node, f"sizes has {sizes.size} values for {len(axes)} axes")
        policy = _str_attr(ctx, node, "keep_aspect_ratio_policy", "stretch")
        ratios = [np.float32(s) / np.float32(shape[a]) for a, s in zip(axes, sizes.reshape(-1))]
        if policy == "stretch":
            for a, s, r in zip(axes, sizes.reshape(-1), ratios):
                full_sizes[a], full_scales[a] = int(s), float(r)
        elif policy in ("not_larger", "not_smaller"):
            common = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:  # round half up
                full_sizes[a] = int(np.floor(common * np.float32(shape[a]) + np.float32(0.5)))
                full_scales[a] = float(common)
        else:
            raise _fail(ctx, node, f"unsupported keep_aspect_ratio_policy '{policy}'")
    elif scales is not None:
        if scales.size != len(axes):
            raise _fail(ctx, node, f"scales has {scales.size} values for {len(axes)} axes")
        for a, s in zip(axes, scales.astype(np.float32).reshape(-1)):
            if s <= 0:
                raise _fail(ctx, node, f"scale {float(s)} is not positive")
            full_sizes[a], full_scales[a] = int(np.float32(shape[a]) * s), float(s)
    else:
        raise _fail(ctx, node, "needs either scales or sizes")
    return full_sizes, full_scales


def _add_resize(ctx, node, x, mode, scales, sizes, coord_mode, nearest_mode):
    shape = _require_4d(ctx, node, x)
    out, scale = _output_and_scales(ctx, node, shape, scales, sizes)
    if out[:2] != list(shape[:2]) or scale[:2] != [1.0, 1.0]:
        raise _fail(ctx, node, f"only H and W can be resized (input {list(shape)}, output {out}, "
                               f"scales {scale}); N and C scales must be 1")
    if min(out) <= 0:
        raise _fail(ctx, node, f"output shape {out} is empty")
    if out == list(shape):
        # onnxruntime copies the input when no axis changes size, whatever the scales say.
        ctx.add("Identity", node, [x])
        return
    if coord_mode not in COORDINATE_MODES:
        raise _fail(ctx, node, f"coordinate_transformation_mode '{coord_mode}' is not supported "
                               f"(supported: {', '.join(COORDINATE_MODES)})")
    if coord_mode == "align_corners" and sizes is None:
        _check_whole_lengths(ctx, node, shape, scale)
    args = {"size": out[2:], "scale": [float(s) for s in scale[2:]],
            "coordinate_transformation_mode": coord_mode, "data_format": "NCHW"}
    if mode == "nearest":
        ctx.add("ResizeNearestNeighbor", node, [x], nearest_mode=nearest_mode, **args)
    elif mode in ("linear", "bilinear"):
        if int(ctx.attr(node, "antialias", 0)) and min(scale) < 1:
            raise _fail(ctx, node, "antialiased linear downscaling is not supported")
        ctx.add("ResizeBilinear", node, [x], **args)
    elif mode == "cubic":
        if int(ctx.attr(node, "antialias", 0)) and min(scale) < 1:
            raise _fail(ctx, node, "antialiased cubic downscaling is not supported")
        ctx.add("ResizeBicubic", node, [x], cubic_coeff_a=float(ctx.attr(node, "cubic_coeff_a", -0.75)),
                exclude_outside=int(ctx.attr(node, "exclude_outside", 0)), **args)
    else:
        raise _fail(ctx, node, f"mode '{mode}' is not supported (nearest, linear and cubic are)")


def _check_whole_lengths(ctx, node, shape, scale):
    """align_corners divides by the resized length minus one. With a scale giving a
    fractional length (5 * 0.6 = 3.0 but 4 * 0.6 = 2.4), onnx's reference uses the
    fractional length and onnxruntime the floored one; refuse rather than pick one."""
    for axis in (2, 3):
        length = float(np.float32(shape[axis]) * np.float32(scale[axis]))
        if abs(length - round(length)) > 1e-4:
            raise _fail(ctx, node, f"align_corners with scale {scale[axis]:g} on axis {axis} gives a "
                                   f"fractional length {length:g}, where implementations disagree; "
                                   f"give sizes instead of scales")


@onnx_op("Resize")
def resize(ctx, node):
    x = ctx.inp(node, 0)
    mode = _str_attr(ctx, node, "mode", "nearest")
    if ctx.opset < 11:  # Resize-10: (X, scales); its transform is asymmetric, its rounding legacy
        scales = _static_input(ctx, node, 1, "scales")
        _add_resize(ctx, node, x, mode, scales, None, "asymmetric", "legacy")
        return
    scales = _static_input(ctx, node, 2, "scales")
    sizes = _static_input(ctx, node, 3, "sizes")
    coord_mode = _str_attr(ctx, node, "coordinate_transformation_mode", "half_pixel")
    nearest_mode = _str_attr(ctx, node, "nearest_mode", "round_prefer_floor")
    _add_resize(ctx, node, x, mode, scales, sizes, coord_mode, nearest_mode)


@onnx_op("Upsample")
def upsample(ctx, node):
    x = ctx.inp(node, 0)
    scales = _static_input(ctx, node, 1, "scales")
    if scales is None:  # Upsample-7 keeps them in an attribute
        scales = ctx.attr(node, "scales", None)
        scales = None if scales is None else np.asarray(scales, np.float32)
    mode = _str_attr(ctx, node, "mode", "nearest")
    _add_resize(ctx, node, x, mode, scales, None, "asymmetric", "legacy")


# ---- DepthToSpace / SpaceToDepth --------------------------------------------
def _block_op(ctx, node, op_type, mode):
    x = ctx.inp(node, 0)
    n, c, h, w = _require_4d(ctx, node, x)
    block = int(ctx.attr(node, "blocksize"))
    if block < 1:
        raise _fail(ctx, node, f"blocksize {block} must be positive")
    if mode not in ("DCR", "CRD"):
        raise _fail(ctx, node, f"mode '{mode}' is not supported (DCR and CRD are)")
    if op_type == "DepthToSpace" and c % (block * block):
        raise _fail(ctx, node, f"{c} channels are not divisible by blocksize^2 = {block * block}")
    if op_type == "SpaceToDepth" and (h % block or w % block):
        raise _fail(ctx, node, f"spatial size {h}x{w} is not divisible by blocksize {block}")
    ctx.add(op_type, node, [x], block_size=block, mode=mode, data_format="NCHW")


@onnx_op("DepthToSpace")
def depth_to_space(ctx, node):
    _block_op(ctx, node, "DepthToSpace", _str_attr(ctx, node, "mode", "DCR"))


@onnx_op("SpaceToDepth")
def space_to_depth(ctx, node):
    _block_op(ctx, node, "SpaceToDepth", _str_attr(ctx, node, "mode", "DCR"))  # mode: opset 28


# ---- Pad ----------------------------------------------------------------------
PAD_MODES = {"constant": "CONSTANT", "reflect": "REFLECT", "edge": "EDGE", "wrap": "WRAP"}


def _pad_amounts(ctx, node, rank):
    """ONNX pads as a full [begins..., ends...] list over all `rank` axes."""
    if ctx.opset < 11:
        pads = ctx.attr(node, "pads", None)
        pads = ctx.attr(node, "paddings", None) if pads is None else pads  # Pad-1 spelling
        if pads is None:
            raise _fail(ctx, node, "has no pads attribute")
        return [int(p) for p in pads]
    pads = _static_input(ctx, node, 1, "pads")
    pads = [] if pads is None else [int(p) for p in pads.reshape(-1)]
    axes = _static_input(ctx, node, 3, "axes")
    if axes is None:
        if len(pads) != 2 * rank:
            raise _fail(ctx, node, f"pads has {len(pads)} values, expected {2 * rank}")
        return pads
    axes = [int(a) % rank for a in axes.reshape(-1)]
    if len(pads) != 2 * len(axes):
        raise _fail(ctx, node, f"pads has {len(pads)} values for {len(axes)} axes")
    full = [0] * (2 * rank)
    for i, a in enumerate(axes):
        full[a], full[rank + a] = pads[i], pads[len(axes) + i]
    return full


@onnx_op("Pad")
def pad(ctx, node):
    x = ctx.inp(node, 0)
    rank = len(ctx.shape(x))
    mode = _str_attr(ctx, node, "mode", "constant")
    if mode not in PAD_MODES:
        raise _fail(ctx, node, f"mode '{mode}' is not supported ({', '.join(PAD_MODES)} are)")
    if ctx.opset < 11:
        value = float(ctx.attr(node, "value", 0.0))
    else:
        value = float(ctx.scalar(node, 2, "constant_value", 0.0))
    ctx.add("Pad", node, [x], paddings=_pad_amounts(ctx, node, rank), pad_type=PAD_MODES[mode],
            constant_value=value)


# ---- InstanceNormalization -------------------------------------------------------
@onnx_op("InstanceNormalization")
def instance_norm(ctx, node):
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    if len(shape) < 3:
        raise _fail(ctx, node, f"needs an input of rank >= 3, got shape {list(shape)}")
    scale, bias = ctx.const(ctx.inp(node, 1)), ctx.const(ctx.inp(node, 2))
    if scale is None or bias is None:
        raise _fail(ctx, node, "scale and B must be constant")
    s = ctx.add_const(ctx.temp(node, "scale"), np.asarray(scale, np.float32).reshape(-1))
    b = ctx.add_const(ctx.temp(node, "bias"), np.asarray(bias, np.float32).reshape(-1))
    ctx.add("InstanceNorm", node, [x, s, b], epsilon=float(ctx.attr(node, "epsilon", 1e-5)),
            data_format="NCHW")


@onnx_op("GridSample")
def grid_sample(ctx, node):
    from_opset = {"bilinear": "linear", "bicubic": "cubic"}   # the names before opset 20
    mode = _str_attr(ctx, node, "mode", "linear" if ctx.opset >= 20 else "bilinear")
    padding = _str_attr(ctx, node, "padding_mode", "zeros")
    if from_opset.get(mode, mode) not in ("linear", "nearest", "cubic") or \
            padding not in ("zeros", "border", "reflection"):
        raise _fail(ctx, node, f"mode '{mode}' / padding_mode '{padding}' is not supported")
    ctx.add("GridSample", node, [ctx.inp(node, 0), ctx.inp(node, 1)], mode=from_opset.get(mode, mode),
            padding_mode=padding, align_corners=int(ctx.attr(node, "align_corners", 0)))


@onnx_op("AffineGrid")
def affine_grid(ctx, node):
    size = static_ints(ctx, node, 1, "size")
    ctx.add("AffineGrid", node, [ctx.inp(node, 0)], size=size,
            align_corners=int(ctx.attr(node, "align_corners", 0)))


@onnx_op("RoiAlign")
def roi_align(ctx, node):
    mode = _str_attr(ctx, node, "mode", "avg")
    coords = _str_attr(ctx, node, "coordinate_transformation_mode",
                       "half_pixel" if ctx.opset >= 16 else "output_half_pixel")
    if mode not in ("avg", "max") or coords not in ("half_pixel", "output_half_pixel"):
        raise _fail(ctx, node, f"mode '{mode}' / coordinate_transformation_mode '{coords}' is not supported")
    ctx.add("RoiAlign", node, ctx.inputs(node), mode=mode, half_pixel=int(coords == "half_pixel"),
            output_height=int(ctx.attr(node, "output_height", 1)), output_width=int(ctx.attr(node, "output_width", 1)),
            sampling_ratio=int(ctx.attr(node, "sampling_ratio", 0)),
            spatial_scale=float(ctx.attr(node, "spatial_scale", 1.0)))
