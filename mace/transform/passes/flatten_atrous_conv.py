"""flatten_atrous_conv: SpaceToBatchND -> Conv2D/DepthwiseConv2d -> BatchToSpaceND becomes one
dilated conv (MACE's FLATTEN_ATROUS_CONV).

This is how TensorFlow spells an atrous (dilated) convolution: tf.nn.atrous_conv2d,
and depthwise or Keras convs with a dilation rate, tile the image into the batch
(block = the rate), run an undilated stride-1 conv on every tile and put the
tiles back. With rate r, the S2B pads (pt, pb), the conv's own top pad ph (in
tile pixels) and the B2S crops (ct, cb), output row o reads input rows
o - P + t*r for filter taps t, where P = pt - ct + ph*r: a conv with dilation r
and top pad P; the bottom pad follows from the output size. The rewrite is
skipped when a pad would be negative or an intermediate tensor has other readers.
"""
from __future__ import annotations

from mace.ir.args import del_arg, get_arg, set_arg
from mace.ops._common import resolve_pads
from mace.transform.shape_inference import infer_shapes

CONVS = {"Conv2D", "DepthwiseConv2d"}


def _nhwc(*ops) -> bool:
    return all(get_arg(op, "data_format", "NHWC") == "NHWC" for op in ops)


def _dilated_pads(graph, s2b, conv, b2s):
    """[top, left, bottom, right] pads of the equivalent dilated conv, or None."""
    block = [int(b) for b in get_arg(s2b, "block_shape")]
    s2b_pads = [int(p) for p in get_arg(s2b, "paddings", [0, 0, 0, 0])]
    crops = [int(c) for c in get_arg(b2s, "crops", [0, 0, 0, 0])]
    _, h, w, _ = graph.shape(s2b.input[0])
    _, sh, sw, _ = graph.shape(s2b.output[0])
    _, oh, ow, _ = graph.shape(b2s.output[0])
    kh, kw = graph.shape(conv.input[1])[2:4]
    tile_pads = resolve_pads((sh, sw), (kh, kw), [1, 1], [1, 1], get_arg(conv, "pads", None),
                             get_arg(conv, "padding", ""))
    pads = [0, 0, 0, 0]
    for d, (size, out, k) in enumerate(((h, oh, kh), (w, ow, kw))):
        top = s2b_pads[d] - crops[d] + tile_pads[d] * block[d]
        pads[d], pads[d + 2] = top, out - size - top + (k - 1) * block[d]
    return pads if min(pads) >= 0 else None


def _match(graph, b2s, producers, consumers, outputs):
    """(s2b, conv) feeding `b2s` as an atrous conv, or None."""
    conv = producers.get(b2s.input[0])
    if conv is None or conv.type not in CONVS:
        return None
    s2b = producers.get(conv.input[0])
    if s2b is None or s2b.type != "SpaceToBatchND":
        return None
    inner = (s2b.output[0], conv.output[0])
    if any(len(consumers[t]) != 1 or t in outputs for t in inner):
        return None
    if get_arg(s2b, "block_shape") != get_arg(b2s, "block_shape") or not _nhwc(s2b, conv, b2s):
        return None
    if list(get_arg(conv, "strides", [1, 1])) != [1, 1] or list(get_arg(conv, "dilations", [1, 1])) != [1, 1]:
        return None
    return s2b, conv


def flatten_atrous_conv(graph, options) -> bool:
    producers, consumers = graph.producers(), graph.consumers()
    outputs = set(graph.output_names)
    removed = set()
    for b2s in graph.net.op:
        if b2s.type != "BatchToSpaceND":
            continue
        match = _match(graph, b2s, producers, consumers, outputs)
        pads = match and _dilated_pads(graph, *match, b2s)
        if not pads:
            continue
        s2b, conv = match
        conv.input[0] = s2b.input[0]
        conv.output[0] = b2s.output[0]
        set_arg(conv, "dilations", [int(b) for b in get_arg(s2b, "block_shape")])
        set_arg(conv, "pads", pads)
        del_arg(conv, "padding")
        conv.framework_op.extend(list(s2b.framework_op) + list(b2s.framework_op))
        removed.update((s2b.name, b2s.name))
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
        infer_shapes(graph)
    return bool(removed)
