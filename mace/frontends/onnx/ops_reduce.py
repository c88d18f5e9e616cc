"""ONNX reductions: Reduce* -> Reduce, ArgMax/ArgMin -> ArgMax, LayerNormalization -> LayerNorm."""
from mace.errors import ModelError
from mace.frontends.onnx.ops_tensor import node_axis, static_ints
from mace.frontends.onnx.registry import onnx_op

REDUCE = {
    "ReduceMean": "MEAN", "ReduceMax": "MAX", "ReduceMin": "MIN", "ReduceSum": "SUM",
    "ReduceProd": "PROD", "ReduceL1": "L1", "ReduceL2": "L2", "ReduceLogSumExp": "LOGSUMEXP",
    "ReduceSumSquare": "SUMSQUARE", "ReduceLogSum": "LOGSUM",
}


def _reduce_axes(ctx, node):
    """The axes list, or None for "all axes" (or none, with noop_with_empty_axes)."""
    # Axes moved from an attribute to an input in opset 13 for ReduceSum, 18 for the rest.
    if ctx.opset >= (13 if node.op_type == "ReduceSum" else 18):
        return static_ints(ctx, node, 1, "axes") if ctx.inp(node, 1) else None
    axes = ctx.attr(node, "axes")
    return None if axes is None else list(axes)


def _make(onnx_type, kind):
    @onnx_op(onnx_type)
    def mapper(ctx, node):
        x = ctx.inp(node, 0)
        rank = len(ctx.shape(x))
        axes = _reduce_axes(ctx, node) or []
        axes = sorted({node_axis(ctx, node, a, rank) for a in axes})
        ctx.add("Reduce", node, [x], reduce_type=kind, axis=axes,
                keepdims=int(ctx.attr(node, "keepdims", 1)),
                noop_with_empty_axes=int(ctx.attr(node, "noop_with_empty_axes", 0)))
    mapper.__name__ = f"map_{onnx_type}"
    return mapper


for _onnx_type, _kind in REDUCE.items():
    _make(_onnx_type, _kind)


@onnx_op("ArgMax", "ArgMin")
def arg_max(ctx, node):
    x = ctx.inp(node, 0)
    ctx.add("ArgMax", node, [x], axis=node_axis(ctx, node, ctx.attr(node, "axis", 0), len(ctx.shape(x))),
            keepdims=int(ctx.attr(node, "keepdims", 1)),
            select_last_index=int(ctx.attr(node, "select_last_index", 0)),
            argmin=int(node.op_type == "ArgMin"))


@onnx_op("LayerNormalization")
def layer_norm(ctx, node):
    x, scale = ctx.inp(node, 0), ctx.inp(node, 1)
    if scale is None:
        raise ModelError(f"LayerNormalization '{ctx.op_name(node)}' has no scale input")
    inputs = [x, scale] + ([ctx.inp(node, 2)] if ctx.inp(node, 2) else [])
    # Mean / InvStdDev are optional: name the skipped ones so outputs keep their positions.
    outputs = list(node.output)
    while outputs and not outputs[-1]:
        outputs.pop()
    outputs = [o or ctx.temp(node, f"unused{i}") for i, o in enumerate(outputs)]
    ctx.add("LayerNorm", node, inputs, outputs,
            axis=node_axis(ctx, node, ctx.attr(node, "axis", -1), len(ctx.shape(x))),
            epsilon=float(ctx.attr(node, "epsilon", 1e-5)))
