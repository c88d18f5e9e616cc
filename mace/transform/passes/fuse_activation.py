"""fuse_activation: fold an Activation into the op that produces its input.

Conv2D, DepthwiseConv2d, Deconv2D, FullyConnected, BatchNorm and float Eltwise
accept RELU, RELUX, LEAKYRELU, CLIP, SIGMOID, TANH, HARDSIGMOID, HARDSWISH as
`activation` args (MACE's FOLD_ACTIVATION, plus a few; PRELU stays separate
since its slope is a tensor). The producer's output must have no other reader.

LayerNorm takes all of these too, on models that run on the CPU in float (its kernels are CPU ones).
SWISH (fuse_hardswish's SiLU) too on models that run on the CPU in float, into the ops whose
fast kernels apply it as they store their output (Conv2D, DepthwiseConv2d, FullyConnected:
the packed GEMM's and the depthwise loop's store step); the GPU and int8 kernels have no SWISH.
So does a PRELU whose slope is a constant per output channel (or one number) into a Conv2D or
DepthwiseConv2d: the slope becomes the conv's fourth input, a vector of its output channels
(after a zero bias where it had none).

A fused activation that is no clamp (HARDSWISH, SIGMOID, ...) whose input tensor had a
quantization-aware range (the Q/DQ pair of a QDQ model between a conv and its activation)
leaves that range on the producer as `pre_activation_range`: the int8 kernels requantize to
it and map each code through a 256-entry table (mace/ops/int8/_base.py TABLE_ACTIVATIONS).
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg, has_arg, set_arg
from mace.ir.qat_ranges import carry_range, qat_ranges
from mace.ops.int8._base import PRE_ACTIVATION_ARG, TABLE_ACTIVATIONS
from mace.transform.passes.fold_batchnorm import _channel_vector as channel_vector
from mace.transform.passes.fuse_hardswish import cpu_float

HOSTS = {"Conv2D", "DepthwiseConv2d", "Deconv2D", "FullyConnected", "BatchNorm", "Eltwise"}
FUSABLE = {"RELU", "RELUX", "LEAKYRELU", "CLIP", "SIGMOID", "TANH", "HARDSIGMOID", "HARDSWISH"}
# kinds only a CPU float model fuses, and the ops that take them
CPU_FUSABLE = {"SWISH"}
CPU_HOSTS = {"Conv2D", "DepthwiseConv2d", "FullyConnected"}
SLOPE_HOSTS = {"Conv2D", "DepthwiseConv2d"}   # a fused PRELU: the slope is input 3
# a CPU float model's LayerNorm takes any of them (openWakeWord's heads: FC -> LayerNorm -> ReLU,
# four of them a run); no GPU or int8 kernel computes a LayerNorm, so none has to follow
CPU_ONLY_HOSTS = {"LayerNorm"}


def _fusable(kind, host_type, cpu: bool) -> bool:
    if host_type in CPU_ONLY_HOSTS:
        return cpu and (kind in FUSABLE or kind in CPU_FUSABLE)
    if kind in FUSABLE:
        return host_type in HOSTS
    return cpu and kind in CPU_FUSABLE and host_type in CPU_HOSTS


def _prelu_slope(graph, op, src):
    """PRELU `op`'s slope as a vector of `src`'s output channels, or None (not a constant per
    channel, or `src` cannot take it)."""
    if (src.type not in SLOPE_HOSTS or len(op.input) != 2 or op.input[1] not in graph.consts
            or src.input[1] not in graph.consts or len(src.input) > 3
            or (len(src.input) == 3 and src.input[2] not in graph.consts)):
        return None
    if np.asarray(graph.consts[op.input[1]]).dtype.kind != "f":
        return None
    return channel_vector(graph, src, op.input[1], graph.consts[src.input[1]].shape[0])


def _take_slope(graph, op, src, slope) -> None:
    if len(src.input) < 3:
        src.input.append(graph.add_const(graph.unique_name(src.name + "_bias"),
                                         np.zeros(slope.shape[0], np.float32)))
    src.input.append(graph.add_const(graph.unique_name(op.input[1]), np.ascontiguousarray(slope, np.float32)))


def fuse_activation(graph, options) -> bool:
    producers = graph.producers()
    consumers = graph.consumers()
    outputs = set(graph.output_names)
    removed, cpu = set(), cpu_float(options)
    for op in graph.net.op:
        if op.type != "Activation" or not op.input:
            continue
        kind = get_arg(op, "activation")
        src = producers.get(op.input[0])
        slope = _prelu_slope(graph, op, src) if kind == "PRELU" and cpu and src is not None else None
        if len(op.input) != 1 and slope is None:
            continue
        if (src is None or not (slope is not None or _fusable(kind, src.type, cpu)) or src.name in removed
                or get_arg(src, "activation", "") or len(consumers[src.output[0]]) != 1
                or src.output[0] in outputs or len(src.output) != 1):
            continue
        if src.type == "Eltwise" and graph.specs.get(src.output[0], (None, None))[1] is not None \
                and graph.dtype(src.output[0]).kind != "f":
            continue
        if slope is not None:
            _take_slope(graph, op, src, slope)
        set_arg(src, "activation", kind)
        for name in ("max_limit", "activation_coefficient"):
            if has_arg(op, name):
                set_arg(src, name, float(get_arg(op, name)))
        # a quantization-aware range of the fused-away tensor (a Q/DQ pair between a conv and its
        # HardSwish) is the grid the int8 kernel requantizes to before a table activation
        pre = qat_ranges(graph.net).get(src.output[0]) if kind in TABLE_ACTIVATIONS else None
        if pre is not None:
            set_arg(src, PRE_ACTIVATION_ARG, [float(pre[0]), float(pre[1])])
        # a quantization-aware range of the fused-away tensor holds, clamped, for the output
        carry_range(graph.net, src.output[0], op.output[0],
                    activation=(kind, float(get_arg(op, "max_limit", 0.0))))
        src.output[0] = op.output[0]
        src.framework_op.extend(op.framework_op)
        removed.add(op.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return bool(removed)
