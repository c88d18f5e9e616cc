"""fold_pad_into_conv: a zero Pad of the spatial axes feeding only convolutions -> their own pads.

Keras' ZeroPadding2D before a VALID stride-2 conv (MediaPipe's detectors, tf2onnx and the TFLite
converter keep it as PAD + VALID conv) writes the whole padded tensor once more: BlazePose's eight
were 0.47 of its 8.6 ms a run, and none of it splits across threads (a copy is memory-bound).
The convolutions read their pads as zeros anyway (the float kernels skip the taps, the int8 ones
use the zero point, which is the real 0), so the Pad's amounts add to each conv's explicit
[top, left, bottom, right] pads and the conv reads the unpadded tensor.

Folded only where that is exact: a CONSTANT pad of 0.0 on a float tensor, amounts >= 0 on the
two spatial axes of every consumer's data_format and nowhere else, every consumer a Conv2D or
DepthwiseConv2d reading it as its input (not its filter) with VALID or explicit pads, and the
Pad's output not a model output. Negative amounts (crops), other fill values and modes, and a Pad
that anything else also reads stay as they are.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import del_arg, get_arg, set_arg
from mace.transform.shape_inference import infer_shapes

CONVS = ("Conv2D", "DepthwiseConv2d")
SPATIAL = {"NHWC": (1, 2), "NCHW": (2, 3)}


def _spatial_amounts(graph, pad, fmt):
    """((top, bottom), (left, right)) of a zero Pad of `fmt`'s spatial axes alone, or None."""
    if len(pad.input) != 1 or get_arg(pad, "pad_type", "CONSTANT") != "CONSTANT":
        return None
    if float(get_arg(pad, "constant_value", 0.0)) != 0.0:
        return None
    shape, dtype = graph.shape(pad.input[0]), graph.dtype(pad.input[0])
    if shape is None or len(shape) != 4 or dtype is None or np.dtype(dtype).kind != "f":
        return None
    amounts = [int(v) for v in get_arg(pad, "paddings", [])]
    if len(amounts) != 8 or min(amounts) < 0:
        return None
    pairs = list(zip(amounts[:4], amounts[4:]))
    h, w = SPATIAL[fmt]
    if any(pairs[axis] != (0, 0) for axis in range(4) if axis not in (h, w)):
        return None
    return pairs[h], pairs[w]


def _foldable(conv, name) -> bool:
    """`conv` reads `name` as its input only, and its pads are VALID or explicit."""
    if conv.type not in CONVS or list(conv.input).count(name) != 1 or conv.input[0] != name:
        return False
    if get_arg(conv, "data_format", "NHWC") not in SPATIAL:
        return False
    return (get_arg(conv, "padding", "") or "").upper() in ("", "VALID")


def _conv_pads(conv) -> list:
    """The conv's own [top, left, bottom, right] (VALID or none given: zeros; _foldable left
    out SAME)."""
    pads = get_arg(conv, "pads", None)
    valid = (get_arg(conv, "padding", "") or "").upper() == "VALID"
    return [0, 0, 0, 0] if valid or not pads else [int(p) for p in pads]


def fold_pad_into_conv(graph, options) -> bool:
    consumers = graph.consumers()
    outputs = set(graph.output_names)
    removed = set()
    for pad in graph.net.op:
        if pad.type != "Pad" or pad.output[0] in outputs:
            continue
        readers = consumers.get(pad.output[0], [])
        if not readers or not all(_foldable(c, pad.output[0]) for c in readers):
            continue
        formats = {get_arg(c, "data_format", "NHWC") for c in readers}
        amounts = _spatial_amounts(graph, pad, formats.pop()) if len(formats) == 1 else None
        if amounts is None:
            continue
        (top, bottom), (left, right) = amounts
        for conv in readers:
            t, l_, b, r = _conv_pads(conv)
            set_arg(conv, "pads", [t + top, l_ + left, b + bottom, r + right])
            del_arg(conv, "padding")
            conv.input[0] = pad.input[0]
            conv.framework_op.extend(list(pad.framework_op))
        removed.add(pad.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
        infer_shapes(graph)
    return bool(removed)
