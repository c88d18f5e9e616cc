"""mark_winograd: ask the CPU kernel for Winograd F(m x m, 3x3) on eligible convs (.yml `winograd: 2|4`).

Sets arg `winograd` = m on Conv2D ops with a constant 3x3 filter, stride 1,
dilation 1 and group 1. The CPU kernel (mace/ops/fast/conv2d.py) still falls
back to im2col where the map is too small for the tiles to pay; the reference
kernel ignores the arg. Measured numbers: docs/performance.md.
"""
from __future__ import annotations

from mace.ir.args import get_arg, set_arg


def eligible(graph, op) -> bool:
    w = graph.consts.get(op.input[1]) if len(op.input) > 1 else None
    return (op.type == "Conv2D" and w is not None and w.ndim == 4 and tuple(w.shape[2:]) == (3, 3)
            and list(get_arg(op, "strides", [1, 1])) == [1, 1]
            and list(get_arg(op, "dilations", [1, 1])) == [1, 1] and get_arg(op, "group", 1) == 1)


def mark_winograd(graph, options) -> bool:
    """Without `winograd: 2|4` in the options nothing changes (the pass still runs and dumps)."""
    m = int(options.get("winograd") or 0)
    if m not in (2, 4):
        return False
    changed = False
    for op in graph.net.op:
        if eligible(graph, op) and get_arg(op, "winograd", 0) != m:
            set_arg(op, "winograd", m)
            changed = True
    return changed
