"""fuse_skip_layer_norm: a residual Add read only by a LayerNorm becomes the LayerNorm's `skip`
input (x + skip normalised in one pass: the fast kernel's loop adds them per row in cache).

Every transformer block ends LayerNorm(x + sublayer(x)) twice: MiniLM-L3's seven LayerNorms
each read an Add of two 16 x 384 tensors, one full pass and one intermediate tensor each. The
Add must be a plain SUM of two tensors of the output's shape (no broadcast, no constant, no
fused activation). Only for CPU float models (the GPU and int8 paths have no `skip`).
"""
from __future__ import annotations

from mace.ir.args import get_arg, set_arg
from mace.transform.passes._patterns import eltwise
from mace.transform.passes.fuse_hardswish import cpu_float


def _residual(graph, op) -> bool:
    return (eltwise(op, "SUM", plain=True) and not any(t in graph.consts for t in op.input)
            and all(graph.shape(t) == graph.shape(op.output[0]) for t in op.input)
            and graph.dtype(op.input[0]) == graph.dtype(op.input[1]) == graph.dtype(op.output[0]))


def fuse_skip_layer_norm(graph, options) -> bool:
    if not cpu_float(options):
        return False
    producers, consumers = graph.producers(), graph.consumers()
    outputs = set(graph.output_names)
    removed = set()
    for ln in graph.net.op:
        if ln.type != "LayerNorm" or get_arg(ln, "skip", 0) or len(ln.output) != 1:
            continue
        add = producers.get(ln.input[0])
        if not _residual(graph, add) or add.name in removed or add.output[0] in outputs \
                or len(consumers[add.output[0]]) != 1:
            continue
        ln.input[0] = add.input[0]
        ln.input.append(add.input[1])
        set_arg(ln, "skip", 1)
        ln.framework_op.extend(add.framework_op)
        removed.add(add.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return bool(removed)
