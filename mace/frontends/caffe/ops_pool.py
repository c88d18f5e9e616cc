"""Caffe Pooling (MAX / AVE, global, CEIL or FLOOR rounding) and LRN -> Pooling, Reduce,
LocalResponseNorm (WITHIN_CHANNEL as square -> average pool -> power -> product).

Caffe's pooled size rounds up by default, clips the last window so it starts
inside the input or its left/top pad, and divides an AVE window by its size
clipped to the padded input (pads count, the area past them does not). That is
the IR Pooling op with ceil_mode=1 and count_include_pad=1; the size is checked
against Caffe's own formula so a case where they would differ is refused.
"""
import math

import numpy as np

from mace.frontends.caffe.caffe_pb2 import LRNParameter, PoolingParameter
from mace.frontends.caffe.registry import caffe_layer


def _one_or_hw(ctx, layer, name, default):
    """[h, w] from `name` (kernel: kernel_size) or `name_h` + `name_w`; pooling takes one
    value each, not a list like convolution."""
    p = layer.pooling_param
    single = "kernel_size" if name == "kernel" else name
    h, w = f"{name}_h", f"{name}_w"
    if p.HasField(h) or p.HasField(w):
        if p.HasField(single) or not (p.HasField(h) and p.HasField(w)):
            raise ctx.fail(layer, f"give {single}, or both {h} and {w}")
        return [int(getattr(p, h)), int(getattr(p, w))]
    if p.HasField(single):
        return [int(getattr(p, single))] * 2
    if default is None:
        raise ctx.fail(layer, "no kernel_size (or kernel_h / kernel_w) and not global_pooling")
    return [default, default]


def caffe_pooled_size(size, kernel, stride, pad, ceil, any_pad) -> int:
    """Caffe's PoolingLayer output length along one axis."""
    span = (size + 2 * pad - kernel) / stride
    n = (math.ceil(span) if ceil else math.floor(span)) + 1
    if any_pad and (n - 1) * stride >= size + pad:
        n -= 1  # the last window must start inside the input or its pad
    return n


def _global(ctx, layer, x, is_max):
    p = layer.pooling_param
    if p.HasField("kernel_size") or p.HasField("kernel_h") or p.HasField("kernel_w"):
        raise ctx.fail(layer, "global_pooling takes no kernel size")
    if _one_or_hw(ctx, layer, "pad", 0) != [0, 0] or _one_or_hw(ctx, layer, "stride", 1) != [1, 1]:
        raise ctx.fail(layer, "global_pooling needs pad 0 and stride 1")
    ctx.add("Reduce", layer, [x], reduce_type="MAX" if is_max else "MEAN", axis=[2, 3], keepdims=1)


@caffe_layer("Pooling")
def pooling(ctx, layer):
    p = layer.pooling_param
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise ctx.fail(layer, f"needs a 4-D NCHW input, got shape {list(shape)}")
    if p.pool not in (PoolingParameter.MAX, PoolingParameter.AVE):
        raise ctx.fail(layer, "STOCHASTIC pooling is not supported (MAX and AVE are)")
    is_max = p.pool == PoolingParameter.MAX
    if p.global_pooling:
        _global(ctx, layer, x, is_max)
        return
    kernel = _one_or_hw(ctx, layer, "kernel", None)
    strides = _one_or_hw(ctx, layer, "stride", 1)
    pads = _one_or_hw(ctx, layer, "pad", 0)
    if min(kernel) < 1 or min(strides) < 1:
        raise ctx.fail(layer, f"kernel {kernel} and stride {strides} must be positive")
    if pads[0] >= kernel[0] or pads[1] >= kernel[1]:
        raise ctx.fail(layer, f"pad {pads} must be smaller than the kernel {kernel}")
    hw = shape[2:]
    if any(hw[d] + 2 * pads[d] < kernel[d] for d in range(2)):
        raise ctx.fail(layer, f"kernel {kernel} is larger than the padded input {list(hw)} + "
                              f"2 * {pads}")
    ceil = p.round_mode == PoolingParameter.CEIL
    op = ctx.add("Pooling", layer, [x], pooling_type="MAX" if is_max else "AVG", kernels=kernel,
                 strides=strides, pads=[pads[0], pads[1], pads[0], pads[1]], ceil_mode=int(ceil),
                 count_include_pad=1, data_format="NCHW")
    want = [caffe_pooled_size(hw[d], kernel[d], strides[d], pads[d], ceil, any(pads))
            for d in range(2)]
    got = list(ctx.shape(op.output[0])[2:])
    if got != want:
        raise ctx.fail(layer, f"Caffe pools {list(hw)} to {want} here, with windows that lie wholly "
                              f"outside the input (stride {strides} > kernel {kernel} without "
                              f"padding); not supported")


@caffe_layer("LRN")
def lrn(ctx, layer):
    p = layer.lrn_param
    x = ctx.inp(layer)
    if len(ctx.shape(x)) != 4:
        raise ctx.fail(layer, f"needs a 4-D NCHW input, got shape {list(ctx.shape(x))}")
    size = int(p.local_size)
    if size < 1 or size % 2 == 0:
        raise ctx.fail(layer, f"local_size {size} must be odd (as Caffe requires)")
    if p.norm_region == LRNParameter.ACROSS_CHANNELS:
        ctx.add("LocalResponseNorm", layer, [x], size=size, alpha=float(p.alpha), beta=float(p.beta),
                bias=float(p.k), data_format="NCHW")
        return
    _lrn_within_channel(ctx, layer, x, size, float(p.alpha), float(p.beta))


def _lrn_within_channel(ctx, layer, x, size, alpha, beta):
    """y = x * (1 + alpha * mean(x^2 over a size x size window, zero padded))^-beta.

    As Caffe builds it: the window average divides by size^2 everywhere, and `k`
    is not used."""
    def step(op_type, inputs, suffix, **args):
        out = ctx.temp(layer, suffix)
        ctx.add(op_type, layer, inputs, [out], name=out, **args)
        return out

    pad = (size - 1) // 2
    sq = step("Eltwise", [x], "square", type="SQUARE")
    avg = step("Pooling", [sq], "avg", pooling_type="AVG", kernels=[size, size], strides=[1, 1],
               pads=[pad] * 4, count_include_pad=1, data_format="NCHW")
    scaled = step("Eltwise", [avg, ctx.new_const(layer, "alpha", _f32(alpha))], "scaled", type="PROD")
    shifted = step("Eltwise", [scaled, ctx.new_const(layer, "one", _f32(1.0))], "shifted", type="SUM")
    factor = step("Eltwise", [shifted, ctx.new_const(layer, "beta", _f32(-beta))], "factor", type="POW")
    ctx.add("Eltwise", layer, [x, factor], type="PROD")


def _f32(v):
    return np.float32(v)
