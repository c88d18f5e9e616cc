"""ONNX If: folded at convert; pymace runs no control flow.

An `If` whose condition is a constant once the deployment file's input shapes are
fixed (torch.onnx's "is this dimension 1?" tests, as in silero VAD) is replaced
by the branch it takes: that subgraph's nodes are mapped in place, reading
outer-scope tensors by name as ONNX scopes them, and the If's outputs become
Identities of the branch's outputs.

An `If` whose condition is only known at run time (openWakeWord's hey_jarvis runs
a second classifier when the first one fires) becomes both branches and a Select
per output: ONNX ops have no side effects, so computing the branch not taken
changes nothing but the time it takes. That needs both branches to give outputs
of one static shape and type; otherwise the node is refused with both shapes.
"""
import numpy as np

from mace.errors import ModelError
from mace.frontends.onnx.registry import onnx_op


def _inline(ctx, branch) -> list:
    """Map the branch's nodes into the graph; the (renamed) names of its outputs."""
    ctx.add_initializers(branch)
    ctx.convert_nodes(branch.node)
    return [ctx.name(o.name) for o in branch.output]


def _spec(ctx, name):
    return tuple(ctx.shape(name)), np.dtype(ctx.graph.dtype(name))


@onnx_op("If")
def if_(ctx, node):
    then_g, else_g = ctx.attr(node, "then_branch"), ctx.attr(node, "else_branch")
    cond_name = ctx.inp(node, 0)
    cond = ctx.const(cond_name)
    if cond is not None and np.asarray(cond).size != 1:
        raise ModelError(f"If '{ctx.op_name(node)}': the condition '{cond_name}' has "
                         f"{np.asarray(cond).size} elements; ONNX wants one")
    if cond is not None:
        taken = then_g if bool(np.asarray(cond).reshape(-1)[0]) else else_g
        for i, src in enumerate(_inline(ctx, taken)):
            if i < len(node.output) and node.output[i]:
                ctx.add("Identity", node, [src], outputs=[node.output[i]], name=ctx.temp(node, f"out{i}"))
        return
    _select_both(ctx, node, cond_name, then_g, else_g)


def _select_both(ctx, node, cond_name, then_g, else_g) -> None:
    """A run-time condition: both branches computed, each output chosen by a Select."""
    then_outs, else_outs = _inline(ctx, then_g), _inline(ctx, else_g)
    for i, (t, e) in enumerate(zip(then_outs, else_outs)):
        (ts, tt), (es, et) = _spec(ctx, t), _spec(ctx, e)
        if ts != es or tt != et:
            raise ModelError(
                f"If '{ctx.op_name(node)}': the condition '{cond_name}' is computed at run time "
                f"(it is not constant for the deployment file's input shapes), and output {i} is "
                f"{list(ts)} {tt} from then_branch but {list(es)} {et} from else_branch; pymace "
                f"runs no control flow, and can select between the branches only when their "
                f"outputs agree in shape and type")
    if int(np.prod(ctx.shape(cond_name))) != 1:
        raise ModelError(f"If '{ctx.op_name(node)}': the condition '{cond_name}' has shape "
                         f"{list(ctx.shape(cond_name))}; ONNX wants one element")
    scalar = ctx.temp(node, "cond")  # a 0-d condition broadcasts to any output shape
    ctx.add("Reshape", node, [cond_name], [scalar], name=scalar, dims=[])
    for i, (t, e) in enumerate(zip(then_outs, else_outs)):
        if i < len(node.output) and node.output[i]:
            ctx.add("Select", node, [scalar, t, e], outputs=[node.output[i]],
                    name=ctx.temp(node, f"select{i}"))
