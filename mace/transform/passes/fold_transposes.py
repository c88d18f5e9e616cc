"""fold_transposes: compose Transpose chains and drop the ones that end as identity.

to_nhwc inserts a Transpose wherever layouts meet; back-to-back pairs (e.g.
NHWC->NCHW->NHWC around a Reshape-free stretch) cancel here.
"""
from __future__ import annotations

from mace.ir.args import get_arg, set_arg
from mace.transform.passes.cleanup import remove_dead_ops, remove_identity


def fold_transposes(graph, options) -> bool:
    producers = graph.producers()
    changed = False
    for op in graph.net.op:
        if op.type != "Transpose":
            continue
        src = producers.get(op.input[0])
        if src is None or src.type != "Transpose":
            continue
        # x -> src(p) -> op(q)  ==  x -> op(p[q])
        p, q = get_arg(src, "dims"), get_arg(op, "dims")
        set_arg(op, "dims", [p[i] for i in q])
        op.input[0] = src.input[0]
        changed = True
    changed |= remove_identity(graph, options)  # identity perms vanish
    if changed:
        remove_dead_ops(graph, options)  # and so do transposes nobody reads now
    return changed
