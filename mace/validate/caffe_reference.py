"""Caffe's forward pass, written out in plain numpy: the validation reference for `platform: caffe`.

No Caffe runtime installs here, so this module is the stand-in for `caffe.Net.forward()`.
It is meant to be read and trusted, not to be fast: each layer follows the
arithmetic of Caffe's own CPU implementation (its loops and clipping rules)
in float64, with explicit loops over kernel taps and pooling windows. It shares
nothing with the converter or the runtime kernels (it never imports mace.ops or
the Caffe frontend); only the file schema (caffe_pb2) is common.

Blobs are NCHW. In-place layers simply overwrite their blob, as in Caffe, so an
output name means the blob's value after the whole forward pass.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from google.protobuf import text_format

from mace.errors import ModelError
from mace.frontends.caffe import caffe_pb2

FLT_MAX = float(np.finfo(np.float32).max)


# ---- reading the files -------------------------------------------------------------
def _load_net(model_path: Path):
    try:
        return text_format.Parse(Path(model_path).read_text(), caffe_pb2.NetParameter())
    except (OSError, UnicodeDecodeError, text_format.ParseError) as e:
        raise ModelError(f"{model_path}: the Caffe reference cannot read the prototxt: {e}") from None


def _load_weights(weight_path) -> dict:
    if weight_path is None:
        return {}
    net = caffe_pb2.NetParameter()
    net.ParseFromString(Path(weight_path).read_bytes())
    return {layer.name: list(layer.blobs) for layer in net.layer}


def _blob(proto) -> np.ndarray:
    legacy = ("num", "channels", "height", "width")
    # Caffe's Blob::FromProto: the 4-D legacy fields if any is set, else `shape` (0-D: no dims).
    if any(proto.HasField(f) for f in legacy):
        dims = [getattr(proto, f) for f in legacy]
    else:
        dims = list(proto.shape.dim)
    if len(proto.data) or len(proto.double_data):
        values = proto.data if len(proto.data) else proto.double_data
    elif proto.HasField("raw_data"):   # OpenCV's shrinkCaffeModel (FLOAT16), NVIDIA's Caffe
        raw = {caffe_pb2.FLOAT16: "<f2", caffe_pb2.FLOAT: "<f4", caffe_pb2.DOUBLE: "<f8"}
        if proto.raw_data_type not in raw:
            raise ModelError(f"the Caffe reference reads no raw_data of type "
                             f"{caffe_pb2.Type.Name(proto.raw_data_type)}")
        values = np.frombuffer(proto.raw_data, raw[proto.raw_data_type])
    else:
        values = []
    return np.asarray(values, np.float64).reshape(dims)


def _rule_met(rule, level, stages) -> bool:
    return ((not rule.HasField("phase") or rule.phase == caffe_pb2.TEST)
            and (not rule.HasField("min_level") or level >= rule.min_level)
            and (not rule.HasField("max_level") or level <= rule.max_level)
            and all(s in stages for s in rule.stage)
            and not any(s in stages for s in rule.not_stage))


def _test_phase_layers(net) -> list:
    level, stages = net.state.level, set(net.state.stage)
    kept = []
    for layer in net.layer:
        if len(layer.include):
            keep = any(_rule_met(r, level, stages) for r in layer.include)
        else:
            keep = not any(_rule_met(r, level, stages) for r in layer.exclude)
        if keep:
            kept.append(layer)
    return kept


# ---- convolution family ------------------------------------------------------------------
def _conv_hw(p, name, default):
    """(h, w) of a ConvolutionParameter geometry field (repeated, or _h/_w)."""
    h, w = f"{name}_h", f"{name}_w"
    if p.HasField(h) or p.HasField(w):
        return getattr(p, h), getattr(p, w)
    values = list(getattr(p, name if name != "kernel" else "kernel_size"))
    if not values:
        return default, default
    return values[0], values[-1]


def _conv_geometry(p):
    kh, kw = _conv_hw(p, "kernel", None)
    sh, sw = _conv_hw(p, "stride", 1)
    ph, pw = _conv_hw(p, "pad", 0)
    dil = list(p.dilation) or [1]
    return (kh, kw), (sh, sw), (ph, pw), (dil[0], dil[-1])


def convolution(layer, bottoms, blobs):
    x = bottoms[0]
    p = layer.convolution_param
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _conv_geometry(p)
    n, c, h, w = x.shape
    g, o = p.group, p.num_output
    weight = blobs[0].reshape(o, c // g, kh, kw)
    oh = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + w] = x
    y = np.zeros((n, o, oh, ow))
    cg, og = c // g, o // g
    for gi in range(g):
        xs, ws = xp[:, gi * cg:(gi + 1) * cg], weight[gi * og:(gi + 1) * og]
        for i in range(kh):
            for j in range(kw):
                # Input pixels tap (i, j) reads for every output position.
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                y[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if p.bias_term:
        y += blobs[1].reshape(1, o, 1, 1)
    return [y]


def deconvolution(layer, bottoms, blobs):
    """Caffe's Deconvolution: the input scatters into the output, then `pad` is cropped."""
    x = bottoms[0]
    p = layer.convolution_param
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _conv_geometry(p)
    n, c, h, w = x.shape
    g, o = p.group, p.num_output
    cg, og = c // g, o // g
    weight = blobs[0].reshape(c, og, kh, kw)
    full_h, full_w = sh * (h - 1) + dh * (kh - 1) + 1, sw * (w - 1) + dw * (kw - 1) + 1
    full = np.zeros((n, o, full_h, full_w))
    for gi in range(g):
        xs, ws = x[:, gi * cg:(gi + 1) * cg], weight[gi * cg:(gi + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                contrib = np.einsum("nchw,co->nohw", xs, ws[:, :, i, j])
                full[:, gi * og:(gi + 1) * og, i * dh:i * dh + sh * (h - 1) + 1:sh,
                     j * dw:j * dw + sw * (w - 1) + 1:sw] += contrib
    y = full[:, :, ph:full_h - ph, pw:full_w - pw]
    if p.bias_term:
        y = y + blobs[1].reshape(1, o, 1, 1)
    return [y]


def inner_product(layer, bottoms, blobs):
    x = bottoms[0]
    p = layer.inner_product_param
    axis = p.axis % x.ndim
    k, n = int(np.prod(x.shape[axis:])), p.num_output
    flat = x.reshape(int(np.prod(x.shape[:axis])), k)
    weight = blobs[0].reshape(k, n) if p.transpose else blobs[0].reshape(n, k).T
    y = flat @ weight
    if p.bias_term:
        y = y + blobs[1].reshape(1, n)
    return [y.reshape(x.shape[:axis] + (n,))]


# ---- pooling and normalisation ---------------------------------------------------
def _pool_hw(p, name, default):
    """(h, w) of a PoolingParameter field: `<name>_h`/`<name>_w`, else `name` (kernel: kernel_size)."""
    single = "kernel_size" if name == "kernel" else name
    if p.HasField(f"{name}_h"):
        return getattr(p, f"{name}_h"), getattr(p, f"{name}_w")
    if p.HasField(single):
        return getattr(p, single), getattr(p, single)
    return default, default


def _pooled_length(size, kernel, stride, pad, ceil, padded):
    span = (size + 2 * pad - kernel) / stride
    length = (math.ceil(span) if ceil else math.floor(span)) + 1
    if padded and (length - 1) * stride >= size + pad:
        length -= 1  # Caffe: the last window starts inside the input or its pad
    return length


def pooling(layer, bottoms, blobs):
    """Caffe's PoolingLayer::Forward_cpu, window by window."""
    x = bottoms[0]
    p = layer.pooling_param
    if p.pool == caffe_pb2.PoolingParameter.STOCHASTIC:
        raise ModelError(f"layer '{layer.name}': the Caffe reference has no STOCHASTIC pooling")
    n, c, h, w = x.shape
    if p.global_pooling:
        (kh, kw), (sh, sw), (ph, pw) = (h, w), (1, 1), (0, 0)
    else:
        (kh, kw), (sh, sw), (ph, pw) = (_pool_hw(p, "kernel", None), _pool_hw(p, "stride", 1),
                                        _pool_hw(p, "pad", 0))
    ceil = p.round_mode == caffe_pb2.PoolingParameter.CEIL
    padded = bool(ph or pw)
    out_h = _pooled_length(h, kh, sh, ph, ceil, padded)
    out_w = _pooled_length(w, kw, sw, pw, ceil, padded)
    y = np.zeros((n, c, out_h, out_w))
    for oy in range(out_h):
        for ox in range(out_w):
            hstart, wstart = oy * sh - ph, ox * sw - pw
            if p.pool == caffe_pb2.PoolingParameter.MAX:
                hs, ws = max(hstart, 0), max(wstart, 0)
                he, we = min(hstart + kh, h), min(wstart + kw, w)
                window = x[:, :, hs:he, ws:we]
                y[:, :, oy, ox] = window.max(axis=(2, 3)) if window.size else -FLT_MAX
            else:
                # The divisor counts the window clipped to the padded input, pads included.
                he, we = min(hstart + kh, h + ph), min(wstart + kw, w + pw)
                pool_size = (he - hstart) * (we - wstart)
                hs, ws, he, we = max(hstart, 0), max(wstart, 0), min(he, h), min(we, w)
                y[:, :, oy, ox] = x[:, :, hs:he, ws:we].sum(axis=(2, 3)) / pool_size
    return [y]


def lrn(layer, bottoms, blobs):
    x = bottoms[0]
    p = layer.lrn_param
    size, alpha, beta = p.local_size, p.alpha, p.beta
    n, c, h, w = x.shape
    pre = (size - 1) // 2
    if p.norm_region == caffe_pb2.LRNParameter.ACROSS_CHANNELS:
        scale = np.empty_like(x)
        for ch in range(c):
            lo, hi = max(ch - pre, 0), min(ch - pre + size, c)
            scale[:, ch] = p.k + alpha / size * np.square(x[:, lo:hi]).sum(axis=1)
        return [x * scale ** -beta]
    # WITHIN_CHANNEL: average of x^2 over a size x size window, zero padded, always / size^2.
    sq = np.zeros((n, c, h + 2 * pre, w + 2 * pre))
    sq[:, :, pre:pre + h, pre:pre + w] = np.square(x)
    total = np.zeros_like(x)
    for i in range(size):
        for j in range(size):
            total += sq[:, :, i:i + h, j:j + w]
    return [x * (1 + alpha * total / (size * size)) ** -beta]


def batch_norm(layer, bottoms, blobs):
    x = bottoms[0]
    if layer.batch_norm_param.HasField("use_global_stats") and not layer.batch_norm_param.use_global_stats:
        raise ModelError(f"layer '{layer.name}': the Caffe reference needs use_global_stats")
    factor = 0.0 if blobs[2].reshape(-1)[0] == 0 else 1.0 / blobs[2].reshape(-1)[0]
    channels = x.shape[1] if x.ndim > 1 else 1
    shape = [1] * x.ndim
    shape[min(1, x.ndim - 1)] = channels
    mean = (blobs[0] * factor).reshape(shape)
    var = (blobs[1] * factor).reshape(shape)
    return [(x - mean) / np.sqrt(var + layer.batch_norm_param.eps)]


def _outer_dim_inner(x, axis, operand):
    """Caffe's view of x for a Scale/Bias operand: (outer, operand size, inner)."""
    axis = 0 if operand.ndim == 0 else axis % x.ndim
    outer = int(np.prod(x.shape[:axis]))
    return x.reshape(outer, operand.size, -1)


def _learned_operand_shape(x, axis, num_axes):
    axis = axis % x.ndim
    end = x.ndim if num_axes == -1 else axis + num_axes
    return x.shape[axis:end]


def scale(layer, bottoms, blobs):
    x = bottoms[0]
    p = layer.scale_param
    if len(bottoms) == 2:
        factor, bias = bottoms[1], (blobs[0] if p.bias_term else None)
    else:
        shape = _learned_operand_shape(x, p.axis, p.num_axes)
        factor = blobs[0].reshape(shape)
        bias = blobs[1].reshape(shape) if p.bias_term else None
    view = _outer_dim_inner(x, p.axis, factor)
    y = view * factor.reshape(1, -1, 1)
    if bias is not None:
        y = y + bias.reshape(1, -1, 1)
    return [y.reshape(x.shape)]


def bias(layer, bottoms, blobs):
    x = bottoms[0]
    p = layer.bias_param
    if len(bottoms) == 2:
        b = bottoms[1]
    else:
        b = blobs[0].reshape(_learned_operand_shape(x, p.axis, p.num_axes))
    return [(_outer_dim_inner(x, p.axis, b) + b.reshape(1, -1, 1)).reshape(x.shape)]


# ---- neurons -----------------------------------------------------------------------
def _neuron(fn):
    def forward(layer, bottoms, blobs):
        return [fn(layer, bottoms[0])]
    return forward


def _relu(layer, x):
    return np.maximum(x, 0) + layer.relu_param.negative_slope * np.minimum(x, 0)


def prelu(layer, bottoms, blobs):
    x = bottoms[0]
    slope = blobs[0].reshape(-1)
    if x.ndim >= 2 and slope.size > 1:
        slope = slope.reshape((1, -1) + (1,) * (x.ndim - 2))
    return [np.maximum(x, 0) + slope * np.minimum(x, 0)]


def _bnll(layer, x):
    return np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(np.minimum(x, 0))))


def _elu(layer, x):
    return np.where(x > 0, x, layer.elu_param.alpha * (np.exp(np.minimum(x, 0)) - 1))


def _power(layer, x):
    p = layer.power_param
    return (p.shift + p.scale * x) ** p.power


def _exp(layer, x):
    p = layer.exp_param
    base = math.e if p.base == -1 else p.base
    return base ** (p.shift + p.scale * x)


def _log(layer, x):
    p = layer.log_param
    y = np.log(p.shift + p.scale * x)
    return y if p.base == -1 else y / math.log(p.base)


NEURONS = {
    "ReLU": _relu,
    "Sigmoid": lambda layer, x: 1.0 / (1.0 + np.exp(-x)),
    "TanH": lambda layer, x: np.tanh(x),
    "ELU": _elu,
    "AbsVal": lambda layer, x: np.abs(x),
    "BNLL": _bnll,
    "Clip": lambda layer, x: np.clip(x, layer.clip_param.min, layer.clip_param.max),
    "Power": _power,
    "Exp": _exp,
    "Log": _log,
    "Threshold": lambda layer, x: (x > layer.threshold_param.threshold).astype(np.float64),
    "Dropout": lambda layer, x: x,  # TEST phase: a copy
}


# ---- blob plumbing ----------------------------------------------------------------
def eltwise(layer, bottoms, blobs):
    p = layer.eltwise_param
    if p.operation == caffe_pb2.EltwiseParameter.PROD:
        return [np.prod(np.stack(bottoms), axis=0)]
    if p.operation == caffe_pb2.EltwiseParameter.MAX:
        return [np.max(np.stack(bottoms), axis=0)]
    coeff = list(p.coeff) or [1.0] * len(bottoms)
    return [sum(c * b for c, b in zip(coeff, bottoms))]


def concat(layer, bottoms, blobs):
    p = layer.concat_param
    axis = p.concat_dim if p.HasField("concat_dim") else p.axis % bottoms[0].ndim
    return [np.concatenate(bottoms, axis=axis)]


def slice_layer(layer, bottoms, blobs):
    x = bottoms[0]
    p = layer.slice_param
    axis = p.slice_dim if p.HasField("slice_dim") else p.axis % x.ndim
    points = list(p.slice_point)
    if not points:
        step = x.shape[axis] // len(layer.top)
        points = [step * i for i in range(1, len(layer.top))]
    return np.split(x, points, axis=axis)


def split(layer, bottoms, blobs):
    return [bottoms[0].copy() for _ in layer.top]


def softmax(layer, bottoms, blobs):
    x = bottoms[0]
    axis = layer.softmax_param.axis % x.ndim
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [e / e.sum(axis=axis, keepdims=True)]


def flatten(layer, bottoms, blobs):
    x = bottoms[0]
    start = layer.flatten_param.axis % x.ndim
    end = layer.flatten_param.end_axis % x.ndim
    return [x.reshape(x.shape[:start] + (-1,) + x.shape[end + 1:])]


def reshape(layer, bottoms, blobs):
    """Caffe's ReshapeLayer: replace input axes [axis, axis + num_axes) by `shape`
    (0 copies the input size at that position, -1 is inferred)."""
    x = bottoms[0]
    p = layer.reshape_param
    start = p.axis if p.axis >= 0 else x.ndim + p.axis + 1
    end = x.ndim if p.num_axes == -1 else start + p.num_axes
    middle = [x.shape[start + i] if d == 0 else d for i, d in enumerate(p.shape.dim)]
    return [x.reshape(list(x.shape[:start]) + middle + list(x.shape[end:]))]


def crop(layer, bottoms, blobs):
    x, ref = bottoms
    p = layer.crop_param
    start = p.axis % x.ndim
    offsets = list(p.offset)
    index = []
    for axis in range(x.ndim):
        if axis < start:
            index.append(slice(None))
            continue
        off = 0 if not offsets else offsets[0] if len(offsets) == 1 else offsets[axis - start]
        index.append(slice(off, off + ref.shape[axis]))
    return [x[tuple(index)]]


def permute(layer, bottoms, blobs):
    x = bottoms[0]
    order = list(layer.permute_param.order)
    order += [a for a in range(x.ndim) if a not in order]
    return [x.transpose(order)]


def _argmax_last(values, axis):
    """Index of the maximum along `axis`; among equal maxima the last index, as Caffe's
    descending sort of (value, index) pairs gives."""
    flipped = np.flip(values, axis=axis)
    return values.shape[axis] - 1 - np.argmax(flipped, axis=axis)


def argmax(layer, bottoms, blobs):
    x = bottoms[0]
    p = layer.argmax_param
    if p.HasField("axis"):
        axis = p.axis % x.ndim
        if p.out_max_val:
            return [x.max(axis=axis, keepdims=True)]
        return [np.expand_dims(_argmax_last(x, axis), axis).astype(np.float64)]
    flat = x.reshape(x.shape[0], -1)
    index = _argmax_last(flat, 1).astype(np.float64)
    rows = [index, flat.max(axis=1)] if p.out_max_val else [index]
    tail = [1] * (max(x.ndim, 3) - 2)
    return [np.stack(rows, axis=1).reshape([x.shape[0], len(rows)] + tail)]


# ---- SSD (the SSD fork's prior_box, normalize and detection_output layers) -------------
def prior_box(layer, bottoms, blobs):
    """PriorBoxLayer::Forward_cpu: cell by cell, box by box."""
    p = layer.prior_box_param
    (_, _, layer_h, layer_w), (_, _, image_h, image_w) = bottoms[0].shape, bottoms[1].shape
    ratios = [1.0]
    for r in p.aspect_ratio:
        if all(abs(r - seen) >= 1e-6 for seen in ratios):
            ratios += [r, 1.0 / r] if p.flip else [r]
    if p.HasField("img_size"):
        image_h = image_w = p.img_size
    elif p.HasField("img_h"):
        image_h, image_w = p.img_h, p.img_w
    if p.HasField("step"):
        step_h = step_w = p.step
    elif p.HasField("step_h"):
        step_h, step_w = p.step_h, p.step_w
    else:
        step_h, step_w = image_h / layer_h, image_w / layer_w
    boxes = []
    for h in range(layer_h):
        for w in range(layer_w):
            cx, cy = (w + p.offset) * step_w, (h + p.offset) * step_h
            for s, min_size in enumerate(p.min_size):
                sides = [(min_size, min_size)]
                if len(p.max_size):
                    sides.append((math.sqrt(min_size * p.max_size[s]),) * 2)
                sides += [(min_size * math.sqrt(r), min_size / math.sqrt(r)) for r in ratios
                          if abs(r - 1.0) >= 1e-6]
                for bw, bh in sides:
                    boxes += [(cx - bw / 2) / image_w, (cy - bh / 2) / image_h,
                              (cx + bw / 2) / image_w, (cy + bh / 2) / image_h]
    if p.clip:
        boxes = [min(max(v, 0.0), 1.0) for v in boxes]
    variance = list(p.variance) or [0.1]
    variances = variance * (len(boxes) // len(variance))
    return [np.array([boxes, variances], np.float64)[None]]


def normalize(layer, bottoms, blobs):
    """NormalizeLayer::Forward_cpu, sample by sample."""
    p = layer.norm_param
    x = bottoms[0]
    scale = blobs[0].reshape(-1)
    y = np.empty_like(x)
    for n in range(x.shape[0]):
        sample = x[n].reshape(x.shape[1], -1)   # (channels, spatial)
        if p.across_spatial:
            norm = math.sqrt(float((sample ** 2).sum()) + p.eps)
        else:
            norm = np.sqrt((sample ** 2).sum(axis=0, keepdims=True) + p.eps)
        scaled = sample / norm
        scaled *= scale[0] if p.channel_shared else scale.reshape(-1, 1)
        y[n] = scaled.reshape(x.shape[1:])
    return [y]


def _decode_box(prior, var, loc, code_type, encoded):
    """bbox_util's DecodeBBox for one box (the variances already in the target when encoded)."""
    v = (1.0, 1.0, 1.0, 1.0) if encoded else var
    pw, ph = prior[2] - prior[0], prior[3] - prior[1]
    if code_type == caffe_pb2.PriorBoxParameter.CORNER:
        return [prior[k] + v[k] * loc[k] for k in range(4)]
    if code_type == caffe_pb2.PriorBoxParameter.CORNER_SIZE:
        size = (pw, ph, pw, ph)
        return [prior[k] + v[k] * loc[k] * size[k] for k in range(4)]
    cx = v[0] * loc[0] * pw + (prior[0] + prior[2]) / 2
    cy = v[1] * loc[1] * ph + (prior[1] + prior[3]) / 2
    w, h = math.exp(v[2] * loc[2]) * pw, math.exp(v[3] * loc[3]) * ph
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def _box_size(b):
    return 0.0 if b[2] < b[0] or b[3] < b[1] else (b[2] - b[0]) * (b[3] - b[1])


def _jaccard(a, b):
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return 0.0
    inter = _box_size([max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])])
    union = _box_size(a) + _box_size(b) - inter
    return inter / union if union > 0 else 0.0


def _nms_fast(boxes, scores, threshold, nms_threshold, eta, top_k):
    """ApplyNMSFast: scores above threshold, stable by score, top_k, greedy suppression."""
    order = sorted((i for i in range(len(scores)) if scores[i] > threshold), key=lambda i: -scores[i])
    if top_k > -1:
        order = order[:top_k]
    kept, adaptive = [], nms_threshold
    for i in order:
        keep = all(_jaccard(boxes[i], boxes[k]) <= adaptive for k in kept)
        if keep:
            kept.append(i)
            if eta < 1 and adaptive > 0.5:
                adaptive *= eta
    return kept


def detection_output(layer, bottoms, blobs):
    """DetectionOutputLayer::Forward_cpu: rows (image, label, score, xmin, ymin, xmax, ymax)."""
    p = layer.detection_output_param
    loc, conf, prior = bottoms
    num, classes = loc.shape[0], p.num_classes
    loc_classes = 1 if p.share_location else classes
    prior = prior.reshape(2, -1, 4)
    priors = prior.shape[1]
    loc, conf = loc.reshape(num, priors, loc_classes, 4), conf.reshape(num, priors, classes)
    threshold = p.confidence_threshold if p.HasField("confidence_threshold") else -FLT_MAX
    top_k = p.nms_param.top_k if p.nms_param.HasField("top_k") else -1
    rows = []
    for i in range(num):
        kept = {}   # label -> prior indices, best first
        boxes_of = {}
        for c in range(classes):
            if c == p.background_label_id:
                continue
            lc = 0 if p.share_location else c
            if lc not in boxes_of:
                boxes_of[lc] = [_decode_box(prior[0, k], prior[1, k], loc[i, k, lc], p.code_type,
                                            p.variance_encoded_in_target) for k in range(priors)]
            kept[c] = _nms_fast(boxes_of[lc], conf[i, :, c], threshold, p.nms_param.nms_threshold,
                                p.nms_param.eta, top_k)
        total = sum(len(v) for v in kept.values())
        if -1 < p.keep_top_k < total:
            ranked = sorted(((conf[i, k, c], c, k) for c, ks in kept.items() for k in ks),
                            key=lambda t: -t[0])[:p.keep_top_k]
            kept = {}
            for _, c, k in ranked:
                kept.setdefault(c, []).append(k)
        for c in sorted(kept):
            box_label = 0 if p.share_location else c
            rows += [[i, c, conf[i, k, c], *boxes_of[box_label][k]] for k in kept[c]]
    if not rows:   # Caffe's "no detections": one row per image, the rest -1
        rows = [[i] + [-1.0] * 6 for i in range(num)]
    return [np.array(rows, np.float64).reshape(1, 1, len(rows), 7)]


FORWARD = {
    "Convolution": convolution, "Deconvolution": deconvolution, "InnerProduct": inner_product,
    "Pooling": pooling, "LRN": lrn, "BatchNorm": batch_norm, "Scale": scale, "Bias": bias,
    "PReLU": prelu, "Eltwise": eltwise, "Concat": concat, "Slice": slice_layer, "Split": split,
    "Softmax": softmax, "Flatten": flatten, "Reshape": reshape, "Crop": crop, "Permute": permute,
    "ArgMax": argmax, "PriorBox": prior_box, "Normalize": normalize,
    "DetectionOutput": detection_output,
    **{name: _neuron(fn) for name, fn in NEURONS.items()},
}


def _layer_blobs(layer, weights) -> list:
    protos = weights.get(layer.name) or list(layer.blobs)
    return [_blob(b) for b in protos]


def run_caffe(model_path: Path, inputs: dict, output_names: list, num_threads: int = 0,
              weight_path=None) -> dict:
    """Forward the Caffe net on `inputs` (NCHW) and return the named blobs (float32)."""
    net = _load_net(model_path)
    weights = _load_weights(weight_path)
    values = {name: np.asarray(v, np.float64) for name, v in inputs.items()}
    with np.errstate(over="ignore"):  # exp overflowing to inf is the right limit (sigmoid -> 0)
        _forward(net, weights, values, model_path)
    return {name: values[name].astype(np.float32) for name in output_names}


def _forward(net, weights, values, model_path):
    for layer in _test_phase_layers(net):
        if layer.type == "Input":
            continue
        if layer.type not in FORWARD:
            raise ModelError(f"{model_path}: the Caffe reference has no layer type {layer.type}")
        missing = [b for b in layer.bottom if b not in values]
        if missing:
            raise ModelError(f"{model_path}: layer '{layer.name}' reads {missing}, not given")
        tops = FORWARD[layer.type](layer, [values[b] for b in layer.bottom],
                                   _layer_blobs(layer, weights))
        values.update(zip(layer.top, tops))
