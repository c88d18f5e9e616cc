"""ONNX normalisations without a learned running mean: RMSNormalization, GroupNormalization,
MeanVarianceNormalization, LpNormalization (LayerNormalization is in ops_reduce, Batch- and
InstanceNormalization in ops_nn / ops_spatial)."""
import numpy as np

from mace.errors import ModelError
from mace.frontends.onnx.ops_tensor import node_axis
from mace.frontends.onnx.registry import onnx_op


@onnx_op("RMSNormalization")
def rms_norm(ctx, node):
    x = ctx.inp(node, 0)
    ctx.add("RMSNorm", node, [x, ctx.inp(node, 1)],
            axis=node_axis(ctx, node, ctx.attr(node, "axis", -1), len(ctx.shape(x))),
            epsilon=float(ctx.attr(node, "epsilon", 1e-5)))


@onnx_op("GroupNormalization")
def group_norm(ctx, node):
    x, scale, bias = ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2)
    groups = int(ctx.attr(node, "num_groups"))
    channels = ctx.shape(x)[1]
    if tuple(ctx.shape(scale)) == (groups,) and groups != channels:
        # opset 18: one scale/bias per group; opset 21 takes one per channel
        values = [ctx.const(scale), ctx.const(bias)]
        if any(v is None for v in values):
            raise ModelError(f"GroupNormalization '{ctx.op_name(node)}': per-group scale/bias (opset 18) "
                             f"must be constant")
        scale, bias = (ctx.add_const(ctx.temp(node, tag), np.repeat(v, channels // groups))
                       for tag, v in zip(("scale_c", "bias_c"), values))
    ctx.add("GroupNorm", node, [x, scale, bias], num_groups=groups,
            epsilon=float(ctx.attr(node, "epsilon", 1e-5)))


@onnx_op("MeanVarianceNormalization")
def mean_variance_norm(ctx, node):
    x = ctx.inp(node, 0)
    rank = len(ctx.shape(x))
    axes = [node_axis(ctx, node, a, rank) for a in ctx.attr(node, "axes", [0, 2, 3])]
    ctx.add("MeanVarianceNorm", node, [x], axes=axes)


@onnx_op("LpNormalization")
def lp_norm(ctx, node):
    x = ctx.inp(node, 0)
    p = int(ctx.attr(node, "p", 2))
    if p not in (1, 2):
        raise ModelError(f"LpNormalization '{ctx.op_name(node)}': p={p} (only 1 and 2 exist in ONNX)")
    ctx.add("LpNorm", node, [x], p=p,
            axis=node_axis(ctx, node, ctx.attr(node, "axis", -1), len(ctx.shape(x))))
