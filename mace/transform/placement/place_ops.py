"""place_ops: choose the runtime of every op (OperatorDef.device_type).

With a placement plan (named subgraphs, `placement:` rules or `placement: auto`
in the deployment file: mace/transform/placement/plan.py, docs/placement.md) the
plan decides, per op, among CPU, GPU and HEXAGON. Without one, runtime gpu or
cpu+gpu puts every op the GPU can run (a "gpu" kernel whose check(ctx) takes its
shapes and args: mace/ops/gpu/support.py) on the GPU and the rest on the CPU.
Either way the converted .pb and its dump show the choice. With `winograd: 2|4`
it also marks the GPU convolutions that Winograd suits with arg `wino_block_size`.
It runs before `quantize`, which then rewrites only ops placed on the DSP.
"""
from __future__ import annotations

from mace.ir.args import set_arg
from mace.ops.gpu.conv2d import winograd_eligible
from mace.ops.gpu.support import GPU, place
from mace.transform.decided import Decided
from mace.transform.placement.plan import place_plan

# Winograd pays off only with enough channels to amortise its transforms (MACE: 8).
WINOGRAD_MIN_CHANNELS = 8


def gpu_runtime(options) -> bool:
    return options.get("runtime") in ("gpu", "cpu+gpu")


def wants_placement(options) -> bool:
    return gpu_runtime(options) or options.get("placement") is not None


def place_ops(graph, options) -> bool:
    plan = options.get("placement")
    # op name -> why it is not on its group's runtime (plan) or not on the GPU (no plan)
    reasons = place_plan(graph, plan) if plan is not None else place(graph)
    block = int(options.get("winograd") or 0)
    if block in (2, 4):
        for op in graph.net.op:
            if op.device_type == GPU and _winograd_suits(graph, op):
                set_arg(op, "wino_block_size", block)
    return Decided(reasons)


def _winograd_suits(graph, op) -> bool:
    if op.type != "Conv2D" or op.input[1] not in graph.consts:
        return False
    o, i = graph.consts[op.input[1]].shape[:2]
    return winograd_eligible(op, graph.consts[op.input[1]].shape) and min(o, i) >= WINOGRAD_MIN_CHANNELS
