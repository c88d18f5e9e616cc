"""DepthwiseConv2d: one filter per input channel (times a channel multiplier M).

Inputs: x, filter (OIHW with O = C*M, I = 1), optional bias. Args as Conv2D.
Output channel o reads input channel o // M. The CPU kernel sums kh*kw shifted
windows of a padded NHWC buffer, each scaled per channel.
"""
import numpy as np

from mace.ops._common import activation_args, apply_activation, from_nhwc_shape
from mace.ops.conv2d import conv_geometry, padded_buffer, window
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op


@register_op("DepthwiseConv2d", layout=Layout.FIXED)
class DepthwiseConv2d(OpSpec):
    attrs = {
        **FUSED_ACTIVATION, "data_format": "NHWC", "dilations": [1, 1], "group": 1, "padding": "",
        "pads": None, "strides": [1, 1]
    }

    @staticmethod
    def infer(ctx):
        (n, _, _, _), _, _, _, _, (oh, ow) = conv_geometry(ctx, ctx.shapes[0], ctx.shapes[1])
        out = from_nhwc_shape((n, oh, ow, ctx.shapes[1][0]), ctx.arg("data_format"))
        return [(out, ctx.dtypes[0])]


@kernel("DepthwiseConv2d", "cpu")
class DepthwiseConv2dCpu(Kernel):
    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC"
        w = ctx.consts[1]
        geo = conv_geometry(ctx, ctx.input_shapes[0], w.shape)
        self.in_shape, (kh, kw), self.strides, self.dil, self.pads, self.out_hw = geo
        c = self.in_shape[3]
        self.mult = w.shape[0] // c
        # taps[i, j] is the per-output-channel weight of tap (i, j).
        self.taps = np.ascontiguousarray(w[:, 0].astype(np.float32).transpose(1, 2, 0))
        self.bias = None if len(ctx.consts) < 3 or ctx.consts[2] is None else ctx.consts[2].astype(np.float32)
        self.act = activation_args(ctx)
        self.slope = ctx.consts[3] if len(ctx.consts) > 3 else None   # a fused PRELU's, per channel
        xp_shape = list(self.in_shape)
        xp_shape[3] = c * self.mult
        self.xp = padded_buffer(xp_shape, self.pads, 0.0, np.float32)
        self.tmp = np.empty(ctx.output_shapes[0], np.float32)

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        p = self.pads
        _, h, w, _ = self.in_shape
        if self.mult > 1:
            x = np.repeat(x, self.mult, axis=3)
        self.xp[:, p[0]:p[0] + h, p[1]:p[1] + w, :] = x
        # Sum the taps in float32 and round once: a float16 output summed in place rounds at
        # every tap (1 ulp off onnxruntime on onnx's causal-conv fp16 case).
        acc = out if out.dtype == np.float32 else np.empty(out.shape, np.float32)
        acc[...] = 0 if self.bias is None else self.bias
        for i in range(self.taps.shape[0]):
            for j in range(self.taps.shape[1]):
                np.multiply(window(self.xp, i, j, self.dil, self.strides, self.out_hw),
                            self.taps[i, j], out=self.tmp)
                acc += self.tmp
        apply_activation(acc, **self.act, slope=self.slope)
        if acc is not out:
            out[...] = acc
