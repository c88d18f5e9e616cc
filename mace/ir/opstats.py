"""What each op of a converted graph costs, known without running it.

MACs (multiply-accumulates) follow MACE's benchmark statistics: convolutions,
fully connected layers and matrix products count one MAC per weight tap per
output value; BatchNorm one per output value; bilinear resize three (the
interpolations); everything else zero. `ops` follows Plumerai's report rules:
the MACs for conv/depthwise/deconv/fully connected/matmul, two per element for
Add, the window size per output for pooling, zero for Reshape-like ops, and the
number of output elements for every other op. Parameters are the elements of
an op's constant inputs; activations are the bytes of the distinct non-constant
tensors it reads and writes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mace.ir.args import get_arg
from mace.proto import pb

NO_COMPUTE = {"Reshape", "Identity", "Shape", "Squeeze", "ExpandDims", "Unsqueeze", "Flatten"}


@dataclass
class OpStatic:
    index: int
    name: str
    type: str
    framework_ops: list
    inputs: list                      # non-constant input tensor names
    outputs: list
    output_shapes: list               # as stored by the engine
    filter_shape: list = field(default_factory=list)
    strides: list = field(default_factory=list)
    pad: str = ""                     # padding mode or explicit pads
    dilations: list = field(default_factory=list)
    macs: int = 0
    ops: int = 0
    params: int = 0
    param_bytes: int = 0
    activation_bytes: int = 0
    device: str = "CPU"               # placement recorded in the IR (OperatorDef.device_type)


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def _shape(graph, name) -> tuple:
    if name in graph.consts:
        return tuple(graph.consts[name].shape)
    return tuple(graph.specs[name][0]) if name in graph.specs else ()  # () : an unknown tensor


def count_macs(op, graph) -> int:
    """MACE's MAC count of one op (see the module docstring)."""
    out = _prod(_shape(graph, op.output[0])) if op.output else 0
    if op.type in ("Conv2D", "DepthwiseConv2d", "Deconv2D") and len(op.input) > 1:
        w = _shape(graph, op.input[1])
        if len(w) != 4:
            return 0
        _, i, kh, kw = w
        if op.type == "Conv2D":          # filter OIHW, I = C / group
            return out * kh * kw * i
        if op.type == "DepthwiseConv2d":  # one kh*kw window per output value
            return out * kh * kw
        # Deconv2D filter (C_in, C_out / group, kh, kw): every input value meets kh*kw*C_out/g taps
        return _prod(_shape(graph, op.input[0])) * kh * kw * i
    if op.type == "FullyConnected" and len(op.input) > 1:
        w = _shape(graph, op.input[1])
        return out * w[-1] if w else 0
    if op.type == "MatMul":
        a = _shape(graph, op.input[0])
        if not a:
            return 0
        k = a[-2] if len(a) >= 2 and get_arg(op, "transpose_a", 0) else a[-1]
        return out * k
    if op.type == "BatchNorm":
        return out
    if op.type == "ResizeBilinear":
        return 3 * out
    return 0


def run_macs(graph) -> int:
    """Multiply-adds of one whole run: count_macs, and what MACE's statistics leave out, the
    gate products of recurrent layers (every step: W's and R's taps per batch row) and
    integer matrix products (MatMulInteger, as MatMul). What the CPU engine sizes its
    threads by (mace/ops/fast/compute.py)."""
    total = 0
    for op in graph.net.op:
        if op.type in ("LSTM", "GRU") and len(op.input) >= 3:
            steps = _prod(_shape(graph, op.input[0])[:2])   # seq x batch, either layout
            total += steps * (_prod(_shape(graph, op.input[1])) + _prod(_shape(graph, op.input[2])))
        elif op.type == "MatMulInteger" and op.output:
            a = _shape(graph, op.input[0])
            total += _prod(_shape(graph, op.output[0])) * (a[-1] if a else 0)
        else:
            total += count_macs(op, graph)
    return total


def streamed_weight(graph) -> int:
    """Elements of the largest constant weight a FullyConnected of one input row reads (a
    GEMV: each multiply-add loads a weight, so the run's time is the weight's stream, not its
    multiply-adds). What keeps a model of few multiply-adds on its threads (compute.for_run)."""
    largest = 0
    for op in graph.net.op:
        if op.type != "FullyConnected" or len(op.input) < 2 or op.input[1] not in graph.consts:
            continue
        x, w = _shape(graph, op.input[0]), _shape(graph, op.input[1])
        if x and w and _prod(x[:-1]) == 1:
            largest = max(largest, _prod(w))
    return largest


def count_ops(op, graph, macs: int) -> int:
    """Plumerai's #ops of one op (see the module docstring)."""
    if op.type in ("Conv2D", "DepthwiseConv2d", "Deconv2D", "FullyConnected", "MatMul"):
        return macs
    if op.type in NO_COMPUTE:
        return 0
    out = sum(_prod(_shape(graph, t)) for t in op.output)
    if op.type == "Eltwise" and get_arg(op, "type", "") == "SUM":
        return 2 * out
    if op.type == "Pooling":
        k = list(get_arg(op, "kernels", [1, 1])) + [1, 1]
        return out * int(k[0]) * int(k[1])
    return out


def _pad_text(op) -> str:
    padding = get_arg(op, "padding", "")
    if padding:
        return str(padding)
    pads = get_arg(op, "pads", None)
    return str(list(pads)).replace(" ", "") if pads else ""


def _filter_shape(op, graph) -> list:
    if op.type in ("Conv2D", "DepthwiseConv2d", "Deconv2D", "FullyConnected") and len(op.input) > 1:
        return list(_shape(graph, op.input[1]))
    if op.type == "Pooling":
        return [int(k) for k in get_arg(op, "kernels", [])]
    return []


def op_static(index: int, op, graph) -> OpStatic:
    consts = [t for t in op.input if t in graph.consts]
    live = list(dict.fromkeys(t for t in list(op.input) + list(op.output) if t not in graph.consts))
    macs = count_macs(op, graph)
    geometric = op.type in ("Conv2D", "DepthwiseConv2d", "Deconv2D", "Pooling")
    return OpStatic(
        index=index, name=op.name, type=op.type, framework_ops=list(op.framework_op),
        inputs=[t for t in op.input if t not in graph.consts], outputs=list(op.output),
        output_shapes=[list(_shape(graph, t)) for t in op.output],
        filter_shape=_filter_shape(op, graph),
        strides=[int(s) for s in get_arg(op, "strides", [])] if geometric else [],
        pad=_pad_text(op) if geometric else "",
        dilations=[int(d) for d in get_arg(op, "dilations", [1, 1])] if geometric else [],
        macs=macs, ops=count_ops(op, graph, macs),
        params=sum(_prod(_shape(graph, t)) for t in consts),
        param_bytes=sum(graph.nbytes(t) for t in dict.fromkeys(consts)),
        activation_bytes=sum(graph.nbytes(t) for t in live),
        device=pb.DeviceType.Name(op.device_type),
    )


def graph_stats(graph) -> list:
    """OpStatic for every op of `graph`, in execution order."""
    return [op_static(i, op, graph) for i, op in enumerate(graph.net.op)]
