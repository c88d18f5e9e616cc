"""ONNX ops that index, sort and scatter: TopK, CumSum, CumProd, GatherElements, GatherND, ScatterND,
ScatterElements (and the older Scatter), Trilu, OneHot.

Their k / axis / depth inputs must be known at convert (computable from constants and the
deployment file's input shapes), as every shape in a converted model is.
"""

from mace.errors import ModelError
from mace.frontends.onnx.ops_tensor import node_axis
from mace.frontends.onnx.registry import onnx_op


def _text(value, default):
    value = default if value is None else value
    return value.decode() if isinstance(value, bytes) else value


@onnx_op("TopK")
def top_k(ctx, node):
    x = ctx.inp(node, 0)
    k = ctx.attr(node, "k") if ctx.opset < 10 else ctx.scalar(node, 1, "k")
    if k is None:
        raise ModelError(f"TopK '{ctx.op_name(node)}': k must be static")
    ctx.add("TopK", node, [x], k=int(k),
            axis=node_axis(ctx, node, ctx.attr(node, "axis", -1), len(ctx.shape(x))),
            largest=int(ctx.attr(node, "largest", 1)), sorted=int(ctx.attr(node, "sorted", 1)))


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
