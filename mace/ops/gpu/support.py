"""Which ops run on the GPU: those with a "gpu" kernel whose `check` takes their shapes and args.

Shared by the place_ops pass (convert: the choice is written into each
OperatorDef.device_type, so the IR dump shows it) and the GPU runtime (a model
converted for the CPU is placed at load). Everything else stays on the CPU;
the runtime moves tensors across where a CPU op and a GPU op meet.
"""
from __future__ import annotations

from mace.ops.registry import CONVERT, graph_context, kernel_check, spec
from mace.proto import pb

GPU, CPU = pb.GPU, pb.CPU


def gpu_reason(op, graph, stage: str = CONVERT) -> str | None:
    """None if `op` can run on the GPU, else why not (the "gpu" kernel's check, asked of the
    op's context built from the graph)."""
    kernels = spec(op.type).kernels
    if "gpu" not in kernels:
        return "no GPU kernel"
    for t in [t for t in op.input if t not in graph.consts] + list(op.output):
        if t not in graph.specs:
            return f"tensor '{t}' has no known shape"
    try:
        return kernel_check(kernels["gpu"], graph_context(graph, op, stage))
    except Exception as e:  # a malformed op is the CPU kernel's to report
        return f"not checkable for the GPU ({e})"


def place(graph) -> dict:
    """Set device_type on every op; returns op name -> reason for those left on the CPU."""
    on_cpu = {}
    for op in graph.net.op:
        reason = gpu_reason(op, graph)
        op.device_type = CPU if reason else GPU
        if reason:
            on_cpu[op.name] = reason
    return on_cpu


def summary(graph, reasons: dict) -> str:
    """One line: how many ops run where, and why the CPU ones are there."""
    ops = list(graph.net.op)
    gpu = sum(op.device_type == GPU for op in ops)
    line = f"placement: {gpu} of {len(ops)} ops on GPU"
    if gpu == len(ops):
        return line
    by_reason = {}
    for op in ops:
        if op.device_type != GPU:
            key = f"{op.type} ({reasons.get(op.name, 'placed on CPU')})"
            by_reason[key] = by_reason.get(key, 0) + 1
    return line + "; on CPU: " + ", ".join(f"{k} x{n}" if n > 1 else k for k, n in by_reason.items())
