"""Conv2D: 2-D convolution (groups, stride, dilation, explicit or SAME pads, fused activation).

Inputs: x, filter (OIHW, I = C / group), optional bias (O).
Args: strides, dilations, pads [top, left, bottom, right], padding (SAME_UPPER/
SAME_LOWER/VALID, resolved from the input size), group, data_format, and the
fused activation (activation, max_limit, activation_coefficient).
The CPU kernel runs NHWC: 1x1 stride-1 convs are one matmul, others im2col +
GEMM into buffers allocated once at load.
"""
import numpy as np

from mace.ops._common import (activation_args, apply_activation, conv_out_size, from_nhwc_shape,
                              resolve_pads, to_nhwc_shape)
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op


def conv_geometry(ctx, x_shape, w_shape):
    """(N, H, W, C), (kh, kw), strides, dilations, pads, (oh, ow) in NHWC terms."""
    fmt = ctx.arg("data_format", "NHWC")
    n, h, w, c = to_nhwc_shape(x_shape, fmt)
    kh, kw = w_shape[2], w_shape[3]
    strides = list(ctx.arg("strides", [1, 1]))
    dilations = list(ctx.arg("dilations", [1, 1]))
    pads = resolve_pads((h, w), (kh, kw), strides, dilations, ctx.arg("pads", None),
                        ctx.arg("padding", ""))
    oh = conv_out_size(h, kh, strides[0], dilations[0], pads[0], pads[2])
    ow = conv_out_size(w, kw, strides[1], dilations[1], pads[1], pads[3])
    return (n, h, w, c), (kh, kw), strides, dilations, pads, (oh, ow)


def check_groups(ctx, x_shape, w_shape) -> None:
    """group >= 1 dividing the input channels, the filter (OIHW) holding C/group of them per
    output, and kernel, strides and dilations >= 1: else the conv fails only when it runs."""
    group = int(ctx.arg("group", 1))
    c = to_nhwc_shape(x_shape, ctx.arg("data_format", "NHWC"))[3]
    if group < 1 or c % group or w_shape[1] * group != c or w_shape[0] % group:
        raise ValueError(f"group {group} does not fit {c} input channels and a filter of shape "
                         f"{list(w_shape)} (output, input/group, kh, kw)")
    for name, values in (("kernel", w_shape[2:]), ("strides", ctx.arg("strides", [1, 1])),
                         ("dilations", ctx.arg("dilations", [1, 1]))):
        if any(int(v) < 1 for v in values):
            raise ValueError(f"{name} {list(values)}: each must be >= 1")


@register_op("Conv2D", layout=Layout.FIXED)
class Conv2D(OpSpec):
    attrs = {
        **FUSED_ACTIVATION, "data_format": "NHWC", "dilations": [1, 1], "group": 1, "padding": "",
        "pads": None, "strides": [1, 1], "wino_block_size": 0, "winograd": 0
    }

    @staticmethod
    def infer(ctx):
        check_groups(ctx, ctx.shapes[0], ctx.shapes[1])
        (n, _, _, _), _, _, _, _, (oh, ow) = conv_geometry(ctx, ctx.shapes[0], ctx.shapes[1])
        out = from_nhwc_shape((n, oh, ow, ctx.shapes[1][0]), ctx.arg("data_format"))
        return [(out, ctx.dtypes[0])]


def padded_buffer(x_shape, pads, fill, dtype):
    n, h, w, c = x_shape
    return np.full((n, h + pads[0] + pads[2], w + pads[1] + pads[3], c), fill, dtype=dtype)


def window(xp, i, j, dilations, strides, out_hw):
    """The (N, oh, ow, C) view of padded input `xp` seen by kernel tap (i, j)."""
    r0, c0 = i * dilations[0], j * dilations[1]
    return xp[:, r0:r0 + strides[0] * (out_hw[0] - 1) + 1:strides[0],
              c0:c0 + strides[1] * (out_hw[1] - 1) + 1:strides[1], :]


@kernel("Conv2D", "cpu")
class Conv2DCpu(Kernel):
    uses_blas = True

    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC", "CPU Conv2D runs NHWC (to_nhwc pass)"
        w = ctx.consts[1]
        if w is None:
            raise ValueError(f"Conv2D '{ctx.op.name}': filter must be constant")
        geo = conv_geometry(ctx, ctx.input_shapes[0], w.shape)
        self.in_shape, (kh, kw), self.strides, self.dil, self.pads, self.out_hw = geo
        n, _, _, c = self.in_shape
        self.group = g = int(ctx.arg("group"))
        o, cg = w.shape[0], w.shape[1]
        # Filter as GEMM operand: [group, kh*kw*Cg, O/group], taps-major to match im2col.
        wg = w.astype(np.float32).reshape(g, o // g, cg, kh, kw).transpose(0, 3, 4, 2, 1)
        self.wmat = np.ascontiguousarray(wg.reshape(g, kh * kw * cg, o // g))
        self.bias = None if len(ctx.consts) < 3 or ctx.consts[2] is None else ctx.consts[2].astype(np.float32)
        self.act = activation_args(ctx)
        self.slope = ctx.consts[3] if len(ctx.consts) > 3 else None   # a fused PRELU's, per channel
        self.kh, self.kw, self.o = kh, kw, o
        self.pointwise = (kh, kw) == (1, 1) and self.strides == [1, 1] and not any(self.pads) and g == 1
        if not self.pointwise:
            self.xp = padded_buffer(self.in_shape, self.pads, 0.0, np.float32)
            m = n * self.out_hw[0] * self.out_hw[1]
            self.cols = np.empty((g, m, kh * kw * cg), np.float32)
            self.gout = np.empty((g, m, o // g), np.float32) if g > 1 else None

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        out2d = out.reshape(-1, self.o)
        if self.pointwise:
            np.matmul(x.reshape(-1, x.shape[-1]), self.wmat[0], out=out2d)
        else:
            self._im2col(x)
            if self.group == 1:
                np.matmul(self.cols[0], self.wmat[0], out=out2d)
            else:
                np.matmul(self.cols, self.wmat, out=self.gout)
                out2d.reshape(-1, self.group, self.o // self.group)[...] = self.gout.transpose(1, 0, 2)
        if self.bias is not None:
            out2d += self.bias
        apply_activation(out, **self.act, slope=self.slope)

    def _im2col(self, x):
        p, g = self.pads, self.group
        n, h, w, c = self.in_shape
        self.xp[:, p[0]:p[0] + h, p[1]:p[1] + w, :] = x
        oh, ow = self.out_hw
        cols = self.cols.reshape(g, n, oh, ow, self.kh, self.kw, c // g)
        for i in range(self.kh):
            for j in range(self.kw):
                win = window(self.xp, i, j, self.dil, self.strides, self.out_hw)
                if g == 1:
                    cols[0, :, :, :, i, j, :] = win
                else:
                    cols[:, :, :, :, i, j, :] = win.reshape(n, oh, ow, g, c // g).transpose(3, 0, 1, 2, 4)
