"""lower_fake_quantize: when quantizing, each FakeQuantize becomes the clamp it implies.

A quantized model rounds every tensor to its own grid, and a FakeQuantize's grid is
already the recorded range of its input and output (mace/ir/qat_ranges.py), so its
rounding is redundant there; what is left is the clamp. A grid starting at exactly 0 is
a ReLU or Clip an exporter folded into the Q/DQ pair: RELUX(max), which fuse_activation
folds into the producer (a quantized conv clamps for free). Any other grid becomes an
Identity (remove_identity drops it; the range carries the clamp). Runs before the fusion
passes, which then see the graph a float model would have given them.
"""
from __future__ import annotations

from mace.ir.args import del_arg, set_arg
from mace.ops.fake_quantize import grid, real_range

_GRID_ARGS = ("scale", "zero_point", "quant_min", "quant_max")


def lower_fake_quantize(graph, options) -> bool:
    changed = False
    for op in graph.net.op:
        if op.type != "FakeQuantize":
            continue
        scale, zero, qmin, qmax = grid(op)
        for name in _GRID_ARGS:
            del_arg(op, name)
        if zero == qmin:
            op.type = "Activation"
            set_arg(op, "activation", "RELUX")
            set_arg(op, "max_limit", real_range(scale, zero, qmin, qmax)[1])
        else:
            op.type = "Identity"
        changed = True
    return changed
