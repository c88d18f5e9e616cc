"""Ops whose output length depends on the data: NonMaxSuppression (V1-V5), Where with one input, and
TopKV2 (whose k may be a Shape of NMS's rows, computed at run time).

NonMaxSuppression takes boxes [N, 4] and scores [N] of one class and returns the kept box
indices, best first (mace/frontends/single_class_nms.py); max_output_size and the thresholds must
be static. V4 and V5 also return the valid count and, with pad_to_max_output_size, indices padded
with zeros to max_output_size; V5 the kept boxes' scores. V5's soft NMS (soft_nms_sigma > 0: the
scores of overlapping boxes lowered instead of the boxes dropped) is the IR's SoftNonMaxSuppression.
Where(condition) is NonZero transposed: the [n, rank] int64 coordinates of the true elements.
"""
import numpy as np

from mace.frontends.single_class_nms import add_single_class_nms, add_soft_nms
from mace.frontends.tensorflow.registry import tf_op


@tf_op("NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4",
       "NonMaxSuppressionV5")
def non_max_suppression(ctx, node):
    version = 1 if node.op == "NonMaxSuppression" else int(node.op[-1])
    limit = _scalar(ctx, node, 2, "max_output_size")
    iou = ctx.attr(node, "iou_threshold", 0.5) if version == 1 else _scalar(ctx, node, 3, "iou_threshold")
    score = _scalar(ctx, node, 4, "score_threshold") if version >= 3 else None
    sigma = _scalar(ctx, node, 5, "soft_nms_sigma") if version == 5 else 0.0
    pad = bool(ctx.attr(node, "pad_to_max_output_size", False))
    outputs = (ctx.out(node, 0), ctx.out(node, 1) if version == 5 else None,
               ctx.out(node, {4: 1, 5: 2}[version]) if version >= 4 else None)
    if sigma > 0:
        add_soft_nms(ctx, node, ctx.inp(node, 0), ctx.inp(node, 1), int(limit), float(iou), score, sigma,
                     False, pad, outputs)
        return
    add_single_class_nms(ctx, node, ctx.inp(node, 0), ctx.inp(node, 1), int(limit), float(iou), score, pad,
                         outputs)


def _scalar(ctx, node, i: int, what: str) -> float:
    return float(ctx.static(node, i, what).reshape(-1)[0])


@tf_op("Where")
def where(ctx, node):
    x = ctx.inp(node, 0)
    if not ctx.shape(x):
        raise ctx.fail(node, "the condition is a scalar (TensorFlow gives [n, 0]); give it one axis or more")
    found, length = ctx.temp(node, "nonzero"), ctx.temp(node, "length")
    ctx.add("NonZero", node, [x], [found, length], name=found)
    ctx.add("Transpose", node, [found], dims=[1, 0])


@tf_op("TopKV2")
def top_k(ctx, node):
    """The k largest along the last axis, best first, equal values in index order (as TensorFlow);
    TensorFlow's int32 indices are a Cast of the IR's int64. A k computed at run time (a Shape of
    rows NMS kept) plans both outputs at the axis's full size, k in a length tensor beside them."""
    x, k_name = ctx.inp(node, 0), ctx.inp(node, 1)
    k = ctx.const(k_name)
    indices = ctx.temp(node, "int64")
    outputs = [ctx.out(node, 0), indices]
    if k is None:
        ctx.add("TopK", node, [x, k_name], outputs=outputs + [ctx.temp(node, "length")], axis=-1, largest=1,
                sorted=1)
    else:
        ctx.add("TopK", node, [x], outputs=outputs, k=int(np.asarray(k).reshape(-1)[0]), axis=-1, largest=1,
                sorted=1)
    ctx.add("Cast", node, [indices], [ctx.out(node, 1)], name=ctx.temp(node, "indices"), to="int32")
