"""fuse_layer_norm: a decomposed layer norm -> one LayerNorm op.

torch.onnx before opset 17 writes `nn.LayerNorm` as ReduceMean -> Sub -> Pow(2) ->
ReduceMean -> Add(eps) -> Sqrt -> Div -> Mul(gamma) -> Add(beta): nine ops, four of them
full-tensor passes, twice per transformer layer. Fused when the means run over the
trailing axes (keepdims), eps, gamma and beta are constants (gamma and beta of the
normalised trailing shape) and the tensors in between have no other reader.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg, set_arg

_TOL = 1e-6


def _eltwise(op, kind, n_inputs) -> bool:
    return (op is not None and op.type == "Eltwise" and get_arg(op, "type") == kind
            and len(op.input) == n_inputs and not get_arg(op, "activation", "")
            and not get_arg(op, "coeff", None))


def _mean_axes(graph, op):
    """The trailing axes a keepdims ReduceMean runs over, else None."""
    if op is None or op.type != "Reduce" or get_arg(op, "reduce_type") != "MEAN" \
            or not int(get_arg(op, "keepdims", 1)):
        return None
    rank = len(graph.shape(op.input[0]))
    axes = sorted(a % rank for a in (get_arg(op, "axis", []) or []))
    return axes if axes and axes == list(range(axes[0], rank)) else None


def _const_other(graph, op, name):
    """The constant input of binary `op` beside `name`, else None."""
    other = op.input[1] if op.input[0] == name else op.input[0] if op.input[1] == name else None
    return graph.consts.get(other) if other is not None else None


def _match(graph, div, producers, only_reader):
    """(x, axes, eps, the ops from the first mean to the Div) when `div` ends a decomposed
    normalisation (x - mean) / sqrt(var + eps), else None."""
    if not _eltwise(div, "DIV", 2):
        return None
    d, sd = div.input
    sub, sqrt = producers.get(d), producers.get(sd)
    if not (_eltwise(sub, "SUB", 2) and _eltwise(sqrt, "SQRT", 1) and only_reader(sd)):
        return None
    x, mu = sub.input
    mean = producers.get(mu)
    axes = _mean_axes(graph, mean)
    if axes is None or mean.input[0] != x or not only_reader(mu):
        return None
    add = producers.get(sqrt.input[0])
    if not _eltwise(add, "SUM", 2) or not only_reader(sqrt.input[0]):
        return None
    var_name = add.input[0] if add.input[1] in graph.consts else add.input[1]
    eps = graph.consts.get(add.input[1] if var_name == add.input[0] else add.input[0])
    var = producers.get(var_name)
    if eps is None or eps.size != 1 or _mean_axes(graph, var) != axes or not only_reader(var_name):
        return None
    power = producers.get(var.input[0])
    two = _const_other(graph, power, d) if _eltwise(power, "POW", 2) and power.input[0] == d else None
    if two is None or two.size != 1 or abs(float(two.reshape(-1)[0]) - 2.0) > _TOL \
            or not only_reader(var.input[0]):
        return None
    return x, axes, float(eps.reshape(-1)[0]), [mean, sub, power, var, add, sqrt, div]


def fuse_layer_norm(graph, options) -> bool:
    producers, consumers = graph.producers(), graph.consumers()
    outputs = set(graph.output_names)

    def only_reader(name):
        return len(consumers[name]) == 1 and name not in outputs

    removed = set()
    for div in list(graph.net.op):
        found = _match(graph, div, producers, only_reader)
        if found is None or any(o.name in removed for o in found[3]):
            continue
        x, axes, eps, ops = found
        # (x - mean) is read by the Pow and the Div only
        if len(consumers[div.input[0]]) != 2 or div.input[0] in outputs or not only_reader(div.output[0]):
            continue
        scale = next(iter(consumers[div.output[0]]))
        gamma = _const_other(graph, scale, div.output[0]) if _eltwise(scale, "PROD", 2) else None
        if gamma is None or not only_reader(scale.output[0]):
            continue
        shift = next(iter(consumers[scale.output[0]]))
        beta = _const_other(graph, shift, scale.output[0]) if _eltwise(shift, "SUM", 2) else None
        trailing = tuple(graph.shape(x)[axes[0]:])
        if beta is None or np.shape(gamma) != trailing or np.shape(beta) != trailing \
                or np.dtype(graph.dtype(x)).kind != "f":
            continue
        g_name = scale.input[1] if scale.input[0] == div.output[0] else scale.input[0]
        b_name = shift.input[1] if shift.input[0] == scale.output[0] else shift.input[0]
        framework = [f for o in [*ops, scale, shift] for f in o.framework_op]
        del shift.arg[:]
        shift.type = "LayerNorm"
        del shift.input[:]
        shift.input.extend([x, g_name, b_name])
        set_arg(shift, "axis", axes[0])
        set_arg(shift, "epsilon", eps)
        del shift.framework_op[:]
        shift.framework_op.extend(dict.fromkeys(framework))
        removed.update(o.name for o in [*ops, scale])
    if removed:
        graph.set_ops(o for o in graph.net.op if o.name not in removed)
    return bool(removed)
