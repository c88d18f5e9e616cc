"""fuse_activation: fold an Activation into the op that produces its input.

Conv2D, DepthwiseConv2d, Deconv2D, FullyConnected, BatchNorm and float Eltwise
accept RELU, RELUX, LEAKYRELU, CLIP, SIGMOID, TANH, HARDSIGMOID, HARDSWISH as
`activation` args (MACE's FOLD_ACTIVATION, plus a few; PRELU stays separate
since its slope is a tensor). The producer's output must have no other reader.

SWISH (fuse_hardswish's SiLU) too on models that run on the CPU in float, into the ops whose
fast kernels apply it as they store their output (Conv2D, DepthwiseConv2d, FullyConnected:
the packed GEMM's and the depthwise loop's store step); the GPU and int8 kernels have no SWISH.
"""
from __future__ import annotations

from mace.ir.args import get_arg, has_arg, set_arg
from mace.ir.qat_ranges import carry_range
from mace.transform.passes.fuse_hardswish import cpu_float

HOSTS = {"Conv2D", "DepthwiseConv2d", "Deconv2D", "FullyConnected", "BatchNorm", "Eltwise"}
FUSABLE = {"RELU", "RELUX", "LEAKYRELU", "CLIP", "SIGMOID", "TANH", "HARDSIGMOID", "HARDSWISH"}
# kinds only a CPU float model fuses, and the ops that take them
CPU_FUSABLE = {"SWISH"}
CPU_HOSTS = {"Conv2D", "DepthwiseConv2d", "FullyConnected"}


def _fusable(kind, host_type, cpu: bool) -> bool:
    if kind in FUSABLE:
        return host_type in HOSTS
    return cpu and kind in CPU_FUSABLE and host_type in CPU_HOSTS


def fuse_activation(graph, options) -> bool:
    producers = graph.producers()
    consumers = graph.consumers()
    outputs = set(graph.output_names)
    removed, cpu = set(), cpu_float(options)
    for op in graph.net.op:
        if op.type != "Activation" or len(op.input) != 1:
            continue
        kind = get_arg(op, "activation")
        src = producers.get(op.input[0])
        if (src is None or not _fusable(kind, src.type, cpu) or src.name in removed
                or get_arg(src, "activation", "") or len(consumers[src.output[0]]) != 1
                or src.output[0] in outputs or len(src.output) != 1):
            continue
        if src.type == "Eltwise" and graph.specs.get(src.output[0], (None, None))[1] is not None \
                and graph.dtype(src.output[0]).kind != "f":
            continue
        set_arg(src, "activation", kind)
        for name in ("max_limit", "activation_coefficient"):
            if has_arg(op, name):
                set_arg(src, name, float(get_arg(op, name)))
        # a quantization-aware range of the fused-away tensor holds, clamped, for the output
        carry_range(graph.net, src.output[0], op.output[0],
                    activation=(kind, float(get_arg(op, "max_limit", 0.0))))
        src.output[0] = op.output[0]
        src.framework_op.extend(op.framework_op)
        removed.add(op.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return bool(removed)
