"""fold_channel_shuffle: ShuffleNet's channel shuffle becomes one ChannelShuffle op.

ONNX spells the shuffle Reshape(N, g, C/g, H, W) -> Transpose(0, 2, 1, 3, 4) ->
Reshape(N, C, H, W) on NCHW data; after to_nhwc it sits between a Transpose to
NCHW and one back, five copies of the whole tensor. On the NHWC tensor it is a
single permutation of the channel axis (mace/ops/channel_shuffle.py). Matched by
inferred shapes, so Reshape dims written with 0 or -1 match too. Intermediate
tensors with other readers keep their ops (remove_dead_ops drops the rest).
"""
from __future__ import annotations

from mace.ir.args import get_arg, set_arg
from mace.transform.passes.cleanup import remove_dead_ops

TO_NCHW, TO_NHWC, SWAP_GROUPS = [0, 3, 1, 2], [0, 2, 3, 1], [0, 2, 1, 3, 4]


def _is(op, op_type, dims=None) -> bool:
    return op is not None and op.type == op_type and (
        dims is None or list(get_arg(op, "dims", [])) == dims)


def _group(graph, chain) -> int | None:
    """g when the five ops are NHWC -> NCHW, (N, g, C/g, H, W), swap, (N, C, H, W), -> NHWC."""
    t1, r1, _, r2, _ = chain
    x = t1.input[0]
    if x not in graph.specs or len(graph.shape(x)) != 4:
        return None
    n, h, w, c = graph.shape(x)
    split, merged = graph.shape(r1.output[0]), graph.shape(r2.output[0])
    if len(split) != 5 or merged != (n, c, h, w):
        return None
    g = split[1]
    return g if split == (n, g, c // g, h, w) and g * (c // g) == c and 1 < g < c else None


def _match(op, producers):
    """(t1, r1, t2, r2, op) when `op` ends a channel shuffle chain, else None."""
    if not _is(op, "Transpose", TO_NHWC):
        return None
    r2 = producers.get(op.input[0])
    t2 = r2 and producers.get(r2.input[0]) if _is(r2, "Reshape") else None
    r1 = t2 and producers.get(t2.input[0]) if _is(t2, "Transpose", SWAP_GROUPS) else None
    t1 = r1 and producers.get(r1.input[0]) if _is(r1, "Reshape") else None
    return (t1, r1, t2, r2, op) if _is(t1, "Transpose", TO_NCHW) else None


def fold_channel_shuffle(graph, options) -> bool:
    producers = graph.producers()
    changed = False
    for op in graph.net.op:
        chain = _match(op, producers)
        group = chain and _group(graph, chain)
        if not group:
            continue
        op.type, op.input[0] = "ChannelShuffle", chain[0].input[0]
        del op.arg[:]
        set_arg(op, "group", int(group))
        op.framework_op.extend(f for o in chain[:-1] for f in o.framework_op)
        changed = True
    if changed:
        remove_dead_ops(graph, options)
    return changed
