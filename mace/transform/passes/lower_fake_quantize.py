"""lower_fake_quantize: when quantizing, each FakeQuantize becomes the clamp it implies.

A quantized model rounds every tensor to its own grid, and a FakeQuantize's grid is
already the recorded range of its input and output (mace/ir/qat_ranges.py), so its
rounding is redundant there; what is left is the clamp. A grid starting at exactly 0 is
a ReLU or Clip an exporter folded into the Q/DQ pair: RELUX(max), which fuse_activation
folds into the producer (a quantized conv clamps for free; a layer mixed precision keeps
float still clamps), or, where the producer clamps at 0 already (TensorFlow's Relu6 before
its FakeQuant), that producer's limit. Any other grid becomes an Identity (remove_identity
drops it; the range carries the clamp). Runs before the fusion
passes, which then see the graph a float model would have given them.
"""
from __future__ import annotations

from mace.ir.args import del_arg, get_arg, set_arg
from mace.ops.fake_quantize import grid, real_range
from mace.transform.passes.fuse_activation import HOSTS

_GRID_ARGS = ("scale", "zero_point", "quant_min", "quant_max")


def lower_fake_quantize(graph, options) -> bool:
    changed = False
    producers, consumers, outputs = graph.producers(), graph.consumers(), set(graph.output_names)
    for op in graph.net.op:
        if op.type != "FakeQuantize":
            continue
        scale, zero, qmin, qmax = grid(op)
        for name in _GRID_ARGS:
            del_arg(op, name)
        op.type = "Identity"
        if zero == qmin:
            top = real_range(scale, zero, qmin, qmax)[1]
            src = producers.get(op.input[0])
            if not _tighten(src, top, len(consumers.get(op.input[0], ())), op.input[0] in outputs):
                op.type = "Activation"
                set_arg(op, "activation", "RELUX")
                set_arg(op, "max_limit", top)
        changed = True
    return changed


def _tighten(src, top: float, readers: int, is_output: bool) -> bool:
    """A producer already clamping at 0 (fused or its own RELU / RELUX: TensorFlow's Relu6 ->
    FakeQuant) and read only here takes the grid's top as its limit, instead of a second
    clamp that could not fuse into it."""
    if src is None or readers != 1 or is_output or get_arg(src, "activation", "") not in ("RELU", "RELUX"):
        return False
    if src.type != "Activation" and src.type not in HOSTS:
        return False
    limit = top if get_arg(src, "activation") == "RELU" else min(top, float(get_arg(src, "max_limit", top)))
    set_arg(src, "activation", "RELUX")
    set_arg(src, "max_limit", limit)
    return True
