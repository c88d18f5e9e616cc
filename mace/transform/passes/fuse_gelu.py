"""fuse_gelu: torch.onnx's decomposed GELU -> one Activation GELU.

PyTorch before opset 20 exports `nn.GELU()` as `x * 0.5 * (1 + erf(x / sqrt(2)))`:
Div (or Mul by 1/sqrt(2)) -> Erf -> Add 1 -> Mul by x -> Mul by 0.5 (the 0.5 product
may come first, on x). Five elementwise passes over the widest activation of a
transformer block ([seq, 4 * hidden]) become one op.
The tensors in between must have no other reader.
"""
from __future__ import annotations

import math

import numpy as np

from mace.ir.args import get_arg, set_arg

_TOL = 1e-5   # float32 constants: sqrt(2) is 1.4142135


def _scalar(graph, name):
    """The value of a one-element float constant, else None."""
    v = graph.consts.get(name)
    return float(v.reshape(-1)[0]) if v is not None and v.size == 1 and v.dtype.kind == "f" else None


def _eltwise(op, kind) -> bool:
    return (op is not None and op.type == "Eltwise" and get_arg(op, "type") == kind
            and not get_arg(op, "activation", "") and not get_arg(op, "coeff", None))


def _other(graph, op, value):
    """The input of binary `op` that is not the constant `value` (None if neither is)."""
    if len(op.input) != 2:
        return None
    for i, j in ((0, 1), (1, 0)):
        c = _scalar(graph, op.input[j])
        if c is not None and abs(c - value) < _TOL * max(1.0, abs(value)):
            return op.input[i]
    return None


def _scaled_input(graph, op):
    """x of `x / sqrt(2)` or `x * (1 / sqrt(2))`, else None."""
    if _eltwise(op, "DIV") and len(op.input) == 2:
        c = _scalar(graph, op.input[1])
        return op.input[0] if c is not None and abs(c - math.sqrt(2.0)) < 1e-5 else None
    return _other(graph, op, 1 / math.sqrt(2.0)) if _eltwise(op, "PROD") and len(op.input) == 2 else None


def _match(graph, tail, producers, only_reader):
    """(x, [the ops of the pattern]) when `tail` (a Mul) ends a decomposed GELU, else None."""
    if not _eltwise(tail, "PROD") or len(tail.input) != 2:
        return None
    half = _other(graph, tail, 0.5)
    if half is not None:   # (x * (1 + erf)) * 0.5
        mul = producers.get(half)
        if not _eltwise(mul, "PROD") or len(mul.input) != 2 or not only_reader(half):
            return None
        pairs, chain = [(mul.input[0], mul.input[1]), (mul.input[1], mul.input[0])], [mul, tail]
    else:                  # (x * 0.5) * (1 + erf)
        pairs, chain = [(tail.input[0], tail.input[1]), (tail.input[1], tail.input[0])], [tail]
    for x, add_out in pairs:
        add = producers.get(add_out)
        if not _eltwise(add, "SUM") or not only_reader(add_out):
            continue
        erf_out = _other(graph, add, 1.0)
        erf = producers.get(erf_out)
        if not _eltwise(erf, "ERF") or not only_reader(erf_out):
            continue
        div = producers.get(erf.input[0])
        if not only_reader(erf.input[0]) or div is None:
            continue
        if half is None:   # x here is x * 0.5
            scaled = producers.get(x)
            if not _eltwise(scaled, "PROD") or not only_reader(x):
                continue
            x, extra = _other(graph, scaled, 0.5), [scaled]
        else:
            extra = []
        inner = _scaled_input(graph, div)
        if x is not None and inner == x:
            return x, [div, erf, add, *extra, *chain]
    return None


def fuse_gelu(graph, options) -> bool:
    producers, consumers = graph.producers(), graph.consumers()
    outputs = set(graph.output_names)

    def only_reader(name):
        return len(consumers[name]) == 1 and name not in outputs

    removed = set()
    for op in graph.net.op:
        if op.name in removed or op.type != "Eltwise":
            continue
        found = _match(graph, op, producers, only_reader)
        if found is None or np.dtype(graph.dtype(found[0])).kind != "f":
            continue
        x, ops = found
        if any(o.name in removed for o in ops):
            continue
        framework = [f for o in ops for f in o.framework_op]
        del op.arg[:]
        op.type = "Activation"
        del op.input[:]
        op.input.append(x)
        set_arg(op, "activation", "GELU")
        del op.framework_op[:]
        op.framework_op.extend(dict.fromkeys(framework))
        removed.update(o.name for o in ops if o is not op)
    if removed:
        graph.set_ops(o for o in graph.net.op if o.name not in removed)
    return bool(removed)

