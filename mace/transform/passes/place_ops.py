"""place_ops: pick CPU or GPU for every op when the runtime is gpu or cpu+gpu.

The choice is OperatorDef.device_type (GPU where the op has a "gpu" kernel that
accepts its shapes and args, else CPU: see mace/runtime/gpu/placement.py), so
the converted .pb and its dump show it. With `winograd: 2|4` it also marks the
GPU convolutions that Winograd suits with arg `wino_block_size`.
"""
from __future__ import annotations

from mace.ir.args import set_arg
from mace.runtime.gpu.placement import GPU, place

# Winograd pays off only with enough channels to amortise its transforms (MACE: 8).
WINOGRAD_MIN_CHANNELS = 8


def gpu_runtime(options) -> bool:
    return options.get("runtime") in ("gpu", "cpu+gpu")


def place_ops(graph, options) -> bool:
    place(graph)
    block = int(options.get("winograd") or 0)
    if block in (2, 4):
        for op in graph.net.op:
            if op.device_type == GPU and _winograd_suits(graph, op):
                set_arg(op, "wino_block_size", block)
    return False


def _winograd_suits(graph, op) -> bool:
    from mace.ops.gpu.conv2d import winograd_eligible
    if op.type != "Conv2D" or op.input[1] not in graph.consts:
        return False
    o, i = graph.consts[op.input[1]].shape[:2]
    return winograd_eligible(op, graph.consts[op.input[1]].shape) and min(o, i) >= WINOGRAD_MIN_CHANNELS
