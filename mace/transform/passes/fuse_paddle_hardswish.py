"""fuse_paddle_hardswish: Paddle2ONNX's hardswish, x * clip(x + 3, 0, 6) / 6, -> one Activation
HARDSWISH, which fuse_activation then folds into the conv that makes x.

Paddle2ONNX writes every hardswish as Add, Clip, Mul, Div: four element-wise passes over the
tensor after each conv (PP-OCR: 18 of them in ppocr_v2_cls, 24-28 in the v4 detector and
recognizer), where HARDSWISH fused into the conv is none (the packed GEMM's store step). The
clip may come as its own Activation (RELUX 6 or CLIP 0..6) or already fused into the Add; the
division as Div by 6 or Mul by 1/6; the products in either order. Ours computes
x * clip(x / 6 + 0.5, 0, 1), within float32 rounding of Paddle's x * clip(x + 3, 0, 6) / 6.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.transform.passes._patterns import eltwise, other_input

_TOL = 1e-6


def _scalar(graph, name, value) -> bool:
    """`name` is a constant holding the one number `value` (any shape of one element)."""
    if name not in graph.consts:
        return False
    c = np.asarray(graph.consts[name])
    return c.size == 1 and c.dtype.kind == "f" and abs(float(c.reshape(-1)[0]) - value) <= _TOL * max(1, value)


def _clip_0_6(op) -> bool:
    """A fused or standalone clip to [0, 6]: RELUX 6, or CLIP 0..6."""
    kind = get_arg(op, "activation", "")
    lo = 0.0 if kind == "RELUX" else float(get_arg(op, "activation_coefficient", 0.0))
    return kind in ("RELUX", "CLIP") and lo == 0.0 and float(get_arg(op, "max_limit", 0.0)) == 6.0


def _plus_3(graph, op, x) -> bool:
    """op = x + 3 (no activation of its own)."""
    return eltwise(op, "SUM", plain=True) and _scalar(graph, other_input(op, x) or "", 3.0)


def _gate(graph, name, producers, single):
    """The ops making clip(x + 3, 0, 6) as `name`, with x: ([ops], x), or None."""
    g = producers.get(name)
    if g is None or not single(name):
        return None
    if g.type == "Activation" and len(g.input) == 1 and _clip_0_6(g):
        s = producers.get(g.input[0])
        if s is not None and single(s.output[0]):
            for x in s.input:
                if _plus_3(graph, s, x):
                    return [g, s], x
        return None
    if eltwise(g, "SUM") and _clip_0_6(g):   # the clip already fused into the Add
        for x in g.input:
            if _scalar(graph, other_input(g, x) or "", 3.0):
                return [g], x
    return None


def _match(graph, last, producers, single):
    """The ops of x * clip(x + 3, 0, 6) / 6 ending at `last` (Div by 6 or Mul by 1/6): (ops, x)."""
    if get_arg(last, "activation", ""):
        return None
    if eltwise(last, "DIV") and _scalar(graph, last.input[1], 6.0):
        prod_name = last.input[0]
    elif eltwise(last, "PROD"):
        prod_name = next((t for t in last.input if _scalar(graph, other_input(last, t) or "", 1 / 6)), None)
    else:
        return None
    p = producers.get(prod_name) if prod_name else None
    if not eltwise(p, "PROD", plain=True) or not single(p.output[0]):
        return None
    for gate_name in p.input:
        found = _gate(graph, gate_name, producers, single)
        if found and other_input(p, gate_name) == found[1]:
            return [p] + found[0], found[1]
    return None


def fuse_paddle_hardswish(graph, options) -> bool:
    producers, consumers = graph.producers(), graph.consumers()
    outputs = set(graph.output_names)

    def single(name) -> bool:
        return len(consumers.get(name, [])) == 1 and name not in outputs

    removed = set()
    for op in graph.net.op:
        found = _match(graph, op, producers, single) if op.type == "Eltwise" else None
        if not found or np.dtype(graph.dtype(found[1])).kind != "f" \
                or any(o.name in removed for o in found[0]) or op.name in removed:
            continue
        ops, x = found
        for o in ops:
            op.framework_op.extend(o.framework_op)
        del op.arg[:]
        op.type = "Activation"
        del op.input[:]
        op.input.append(x)
        set_arg(op, "activation", "HARDSWISH")
        removed.update(o.name for o in ops)
    if removed:
        graph.set_ops(o for o in graph.net.op if o.name not in removed)
    return bool(removed)
