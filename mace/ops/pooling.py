"""Pooling: max or average pooling over H, W.

Args: pooling_type (MAX | AVG), kernels [kh, kw], strides, dilations, pads
[top, left, bottom, right], padding (SAME_UPPER/SAME_LOWER/VALID), ceil_mode,
count_include_pad, data_format. The CPU kernel reduces kh*kw shifted windows of
a padded NHWC buffer; average divisors are precomputed once at load.
"""
import numpy as np

from mace.ops._common import conv_out_size, from_nhwc_shape, resolve_pads, to_nhwc_shape
from mace.ops.conv2d import window
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


def pool_geometry(ctx, x_shape):
    fmt = ctx.arg("data_format", "NHWC")
    n, h, w, c = to_nhwc_shape(x_shape, fmt)
    k = list(ctx.arg("kernels"))
    strides = list(ctx.arg("strides", [1, 1]))
    dil = list(ctx.arg("dilations", [1, 1]))
    pads = resolve_pads((h, w), k, strides, dil, ctx.arg("pads", None), ctx.arg("padding", ""))
    ceil = bool(ctx.arg("ceil_mode", 0))
    oh = conv_out_size(h, k[0], strides[0], dil[0], pads[0], pads[2], ceil)
    ow = conv_out_size(w, k[1], strides[1], dil[1], pads[1], pads[3], ceil)
    return (n, h, w, c), k, strides, dil, pads, (oh, ow)


@register_op("Pooling", layout=Layout.FIXED)
class Pooling(OpSpec):
    attrs = {
        "ceil_mode": 0, "count_include_pad": 0, "data_format": "NHWC", "dilations": [1, 1],
        "kernels": REQUIRED, "padding": "", "pads": None, "pooling_type": REQUIRED, "strides": [1, 1]
    }

    @staticmethod
    def infer(ctx):
        (n, _, _, c), _, _, _, _, (oh, ow) = pool_geometry(ctx, ctx.shapes[0])
        return [(from_nhwc_shape((n, oh, ow, c), ctx.arg("data_format")), ctx.dtypes[0])]


@kernel("Pooling", "cpu")
class PoolingCpu(Kernel):
    def setup(self, ctx):
        geo = pool_geometry(ctx, ctx.input_shapes[0])
        self.in_shape, self.k, self.strides, self.dil, self.pads, self.out_hw = geo
        self.is_max = ctx.arg("pooling_type") == "MAX"
        n, h, w, c = self.in_shape
        # Windows may run past the explicit pads (ceil_mode): size the buffer for them.
        extra_h = max(0, (self.out_hw[0] - 1) * self.strides[0] + (self.k[0] - 1) * self.dil[0] + 1
                      - (h + self.pads[0] + self.pads[2]))
        extra_w = max(0, (self.out_hw[1] - 1) * self.strides[1] + (self.k[1] - 1) * self.dil[1] + 1
                      - (w + self.pads[1] + self.pads[3]))
        dtype = np.dtype(ctx.input_dtypes[0])
        self.lowest = np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf
        self.xp = np.full((n, h + self.pads[0] + self.pads[2] + extra_h,
                           w + self.pads[1] + self.pads[3] + extra_w, c),
                          self.lowest if self.is_max else 0, dtype if self.is_max else np.float32)
        if not self.is_max:
            self.acc = np.empty(ctx.output_shapes[0], np.float32)
            self.divisor = self._divisor(bool(ctx.arg("count_include_pad")), extra_h, extra_w)

    def _divisor(self, include_pad, extra_h, extra_w):
        """Per-output-position count of cells averaged (pads count only if include_pad)."""
        _, h, w, _ = self.in_shape
        p = self.pads
        ones = np.zeros((1,) + self.xp.shape[1:3] + (1,), np.float32)
        if include_pad:
            ones[:, :h + p[0] + p[2], :w + p[1] + p[3]] = 1
        else:
            ones[:, p[0]:p[0] + h, p[1]:p[1] + w] = 1
        count = np.zeros((1,) + tuple(self.out_hw) + (1,), np.float32)
        for i in range(self.k[0]):
            for j in range(self.k[1]):
                count += window(ones, i, j, self.dil, self.strides, self.out_hw)
        return np.maximum(count, 1)

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        p = self.pads
        _, h, w, _ = self.in_shape
        self.xp[:, p[0]:p[0] + h, p[1]:p[1] + w, :] = x
        if self.is_max:
            out[...] = self.lowest
            for i in range(self.k[0]):
                for j in range(self.k[1]):
                    np.maximum(out, window(self.xp, i, j, self.dil, self.strides, self.out_hw), out=out)
            return
        acc = self.acc
        acc[...] = 0
        for i in range(self.k[0]):
            for j in range(self.k[1]):
                acc += window(self.xp, i, j, self.dil, self.strides, self.out_hw)
        np.divide(acc, self.divisor, out=out, casting="unsafe")
