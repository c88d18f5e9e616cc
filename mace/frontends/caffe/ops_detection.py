"""SSD's detection layers (the SSD fork of Caffe): PriorBox, Normalize, DetectionOutput.

Their IR ops keep Caffe's parameters as args (mace/ops/prior_box.py, normalize.py,
detection_output.py); this module checks what a deploy file can get wrong and names
the layer.
"""
import numpy as np

from mace.frontends.caffe.caffe_pb2 import PriorBoxParameter
from mace.frontends.caffe.registry import caffe_layer

CODE_TYPES = {PriorBoxParameter.CORNER: "CORNER", PriorBoxParameter.CENTER_SIZE: "CENTER_SIZE",
              PriorBoxParameter.CORNER_SIZE: "CORNER_SIZE"}


def _pair(ctx, layer, p, single: str, h: str, w: str, what: str):
    """Caffe's `size` or `size_h`/`size_w` choice as (h, w); (0, 0) when neither is set."""
    if p.HasField(single):
        if p.HasField(h) or p.HasField(w):
            raise ctx.fail(layer, f"give either {single} or {h}/{w}, not both")
        return getattr(p, single), getattr(p, single)
    if p.HasField(h) != p.HasField(w):
        raise ctx.fail(layer, f"{h} and {w} go together ({what})")
    return getattr(p, h), getattr(p, w)


@caffe_layer("PriorBox")
def prior_box(ctx, layer):
    p = layer.prior_box_param
    if len(layer.bottom) != 2:
        raise ctx.fail(layer, "needs two bottoms (the feature map and the image)")
    feature, image = ctx.inputs(layer)
    for name in (feature, image):
        if len(ctx.shape(name)) != 4:
            raise ctx.fail(layer, f"bottom '{name}' has shape {list(ctx.shape(name))}; PriorBox "
                                  f"reads 4-D (N, C, H, W) blobs")
    mins, maxs = [float(v) for v in p.min_size], [float(v) for v in p.max_size]
    if not mins or any(v <= 0 for v in mins):
        raise ctx.fail(layer, f"min_size {mins} must list at least one positive size")
    if maxs and (len(maxs) != len(mins) or any(hi <= lo for lo, hi in zip(mins, maxs))):
        raise ctx.fail(layer, f"max_size {maxs} must give one size per min_size {mins}, each larger")
    variance = [float(v) for v in p.variance] or [0.1]
    if len(variance) not in (1, 4) or any(v <= 0 for v in variance):
        raise ctx.fail(layer, f"variance {variance} must be 1 or 4 positive values")
    img_h, img_w = _pair(ctx, layer, p, "img_size", "img_h", "img_w", "the image size")
    step_h, step_w = _pair(ctx, layer, p, "step", "step_h", "step_w", "the cell size")
    args = dict(min_size=mins, flip=int(p.flip), clip=int(p.clip), variance=variance,
                img_h=int(img_h), img_w=int(img_w), step_h=float(step_h), step_w=float(step_w),
                offset=float(p.offset))
    if maxs:
        args["max_size"] = maxs
    if len(p.aspect_ratio):
        args["aspect_ratio"] = [float(r) for r in p.aspect_ratio]
    ctx.add("PriorBox", layer, [feature, image], **args)


@caffe_layer("Normalize")
def normalize(ctx, layer):
    p = layer.norm_param
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    if len(shape) < 2:
        raise ctx.fail(layer, f"bottom has shape {list(shape)}; Normalize needs (N, C, ...)")
    channels = 1 if p.channel_shared else shape[1]
    scale = ctx.weight(layer, 0, (channels,), 1)
    ctx.add("Normalize", layer, [x, ctx.new_const(layer, "scale", scale)], axis=1,
            across_spatial=int(p.across_spatial), eps=float(p.eps))


@caffe_layer("DetectionOutput")
def detection_output(ctx, layer):
    p = layer.detection_output_param
    if len(layer.bottom) != 3:
        raise ctx.fail(layer, f"has {len(layer.bottom)} bottoms; the three supported are loc, "
                              f"conf and the priors")
    loc, conf, prior = ctx.inputs(layer)
    if not p.HasField("num_classes") or p.num_classes < 1:
        raise ctx.fail(layer, "detection_output_param.num_classes must be set (1 or more)")
    classes = int(p.num_classes)
    priors = int(np.prod(ctx.shape(prior))) // 8
    num = ctx.shape(loc)[0]
    if int(np.prod(ctx.shape(prior))) != priors * 8 or ctx.shape(prior)[0] != 1:
        raise ctx.fail(layer, f"priors '{prior}' have shape {list(ctx.shape(prior))}; expected "
                              f"(1, 2, P * 4), PriorBox's output")
    loc_classes = 1 if p.share_location else classes
    for name, per_prior in ((loc, loc_classes * 4), (conf, classes)):
        if int(np.prod(ctx.shape(name))) != num * priors * per_prior or ctx.shape(name)[0] != num:
            raise ctx.fail(layer, f"bottom '{name}' has shape {list(ctx.shape(name))}; for {priors} "
                                  f"priors and batch {num} it needs {priors * per_prior} values "
                                  f"per image")
    nms = p.nms_param
    if not 0 < nms.eta <= 1:
        raise ctx.fail(layer, f"nms_param.eta {nms.eta} must be in (0, 1]")
    args = dict(num_classes=classes, share_location=int(p.share_location),
                background_label_id=int(p.background_label_id),
                nms_threshold=float(nms.nms_threshold), top_k=int(nms.top_k) if nms.HasField("top_k") else -1,
                eta=float(nms.eta), code_type=CODE_TYPES[p.code_type],
                variance_encoded_in_target=int(p.variance_encoded_in_target),
                keep_top_k=int(p.keep_top_k))
    if p.HasField("confidence_threshold"):
        args["confidence_threshold"] = float(p.confidence_threshold)
    ctx.add("DetectionOutput", layer, [loc, conf, prior], **args)
