"""ONNX ops that index, sort and scatter: TopK, NonZero, NonMaxSuppression, CumSum, CumProd,
GatherElements, GatherND, ScatterND, ScatterElements (and the older Scatter), Trilu, OneHot.

Their axis / depth inputs must be known at convert (computable from constants and the
deployment file's input shapes), as every shape in a converted model is. TopK's k may come from
the data, and NonZero's and NonMaxSuppression's output length does: such outputs are planned at
their static upper bound with a length tensor beside them (`OpSpec.ragged`).
"""
import numpy as np

from mace.errors import ModelError
from mace.frontends.onnx.ops_tensor import node_axis
from mace.frontends.onnx.registry import onnx_op


def _text(value, default):
    value = default if value is None else value
    return value.decode() if isinstance(value, bytes) else value


@onnx_op("TopK")
def top_k(ctx, node):
    x = ctx.inp(node, 0)
    args = dict(axis=node_axis(ctx, node, ctx.attr(node, "axis", -1), len(ctx.shape(x))),
                largest=int(ctx.attr(node, "largest", 1)), sorted=int(ctx.attr(node, "sorted", 1)))
    if ctx.opset >= 10 and ctx.inp(node, 1) is not None and ctx.const(ctx.inp(node, 1)) is None:
        # k computed from the data: outputs at the axis's full size, k in a length tensor
        outputs = list(node.output) + [ctx.temp(node, "length")]
        ctx.add("TopK", node, [x, ctx.inp(node, 1)], outputs=outputs, **args)
        return
    k = ctx.attr(node, "k") if ctx.opset < 10 else ctx.scalar(node, 1, "k")
    if k is None:
        raise ModelError(f"TopK '{ctx.op_name(node)}': k must be given")
    ctx.add("TopK", node, [x], k=int(k), **args)


@onnx_op("NonZero")
def non_zero(ctx, node):
    x = ctx.inp(node, 0)
    value = ctx.const(x)
    if value is not None:   # known at convert: its exact size
        found = np.array(np.nonzero(np.asarray(value).reshape(1) if np.ndim(value) == 0 else value), np.int64)
        src = ctx.add_const(ctx.temp(node, "value"), found)
        ctx.add("Identity", node, [src], name=ctx.temp(node, "const"))
        return
    ctx.add("NonZero", node, [x], outputs=[node.output[0], ctx.temp(node, "length")])


@onnx_op("NonMaxSuppression")
def non_max_suppression(ctx, node):
    limit = ctx.scalar(node, 2, "max_output_boxes_per_class", 0)
    iou = ctx.scalar(node, 3, "iou_threshold", 0.0)
    score = ctx.scalar(node, 4, "score_threshold", None)
    ctx.add("NonMaxSuppression", node, [ctx.inp(node, 0), ctx.inp(node, 1)],
            outputs=[node.output[0], ctx.temp(node, "length")],
            max_output_boxes_per_class=int(limit), iou_threshold=float(iou),
            score_threshold=float(score or 0.0), has_score_threshold=int(score is not None),
            center_point_box=int(ctx.attr(node, "center_point_box", 0)))


@onnx_op("CumSum", "CumProd")
def cumulative(ctx, node):
    x = ctx.inp(node, 0)
    axis = ctx.scalar(node, 1, "axis")
    ctx.add(node.op_type, node, [x], axis=node_axis(ctx, node, axis, len(ctx.shape(x))),
            exclusive=int(ctx.attr(node, "exclusive", 0)), reverse=int(ctx.attr(node, "reverse", 0)))


@onnx_op("GatherElements")
def gather_elements(ctx, node):
    data = ctx.inp(node, 0)
    ctx.add("GatherElements", node, [data, ctx.inp(node, 1)],
            axis=node_axis(ctx, node, ctx.attr(node, "axis", 0), len(ctx.shape(data))))


@onnx_op("GatherND")
def gather_nd(ctx, node):
    ctx.add("GatherND", node, ctx.inputs(node), batch_dims=int(ctx.attr(node, "batch_dims", 0)))


@onnx_op("ScatterND")
def scatter_nd(ctx, node):
    ctx.add("ScatterND", node, ctx.inputs(node), reduction=_text(ctx.attr(node, "reduction"), "none"))


@onnx_op("ScatterElements", "Scatter")
def scatter_elements(ctx, node):
    data = ctx.inp(node, 0)
    ctx.add("ScatterElements", node, ctx.inputs(node),
            axis=node_axis(ctx, node, ctx.attr(node, "axis", 0), len(ctx.shape(data))),
            reduction=_text(ctx.attr(node, "reduction"), "none"))


@onnx_op("Trilu")
def trilu(ctx, node):
    ctx.add("Trilu", node, [ctx.inp(node, 0)], upper=int(ctx.attr(node, "upper", 1)),
            k=int(ctx.scalar(node, 1, "k", 0)))


@onnx_op("OneHot")
def one_hot(ctx, node):
    indices, values = ctx.inp(node, 0), ctx.inp(node, 2)
    depth = ctx.scalar(node, 1, "depth")
    if depth is None or depth != int(depth) or depth < 1:
        raise ModelError(f"OneHot '{ctx.op_name(node)}': depth must be a static positive integer")
    ctx.add("OneHot", node, [indices, values], depth=int(depth), axis=int(ctx.attr(node, "axis", -1)))
