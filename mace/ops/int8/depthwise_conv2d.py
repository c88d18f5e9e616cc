"""DepthwiseConv2d, int8: kh*kw shifted windows of the centred input, each times its tap.

Filter (C*M, 1, kh, kw) quantized per output channel (axis 0); output channel o reads
input channel o // M. Geometry and windows are the float kernel's (mace/ops/conv2d.py).
Products and sums of the centred integers are exact in float64.
"""
import numpy as np

from mace.ops.conv2d import conv_geometry, padded_buffer, window
from mace.ops.int8._gemm import OutputStage, WeightedInt8Kernel, centred
from mace.ops.registry import kernel


@kernel("DepthwiseConv2d", "int8")
class DepthwiseConv2dInt8(WeightedInt8Kernel):
    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC"
        wq = ctx.consts[1]
        geo = conv_geometry(ctx, ctx.input_shapes[0], wq.shape)
        self.in_shape, _, self.strides, self.dil, self.pads, self.out_hw = geo
        n, h, w, c = self.in_shape
        o = wq.shape[0]
        self.mult = o // c
        self.taps = np.ascontiguousarray(centred(wq, ctx.input_quant[1])[:, 0].transpose(1, 2, 0))
        self.zero = self.input_zero(ctx)
        self.xp = xp = padded_buffer((n, h, w, o), self.pads, 0.0, np.float64)
        # Input channel ci fills padded channels ci*M .. ci*M + M-1 (a view of xp).
        p = self.pads
        self.inner = xp.reshape(xp.shape[:3] + (c, self.mult))[:, p[0]:p[0] + h, p[1]:p[1] + w]
        self.acc = np.empty((n,) + tuple(self.out_hw) + (o,))
        self.tmp = np.empty_like(self.acc)
        self.stage = OutputStage(ctx, ctx.input_quant[1], o, self.bias_input)

    def run(self, inputs, outputs):
        np.subtract(inputs[0][..., None], self.zero, out=self.inner)
        self.acc[...] = 0
        for i in range(self.taps.shape[0]):
            for j in range(self.taps.shape[1]):
                np.multiply(window(self.xp, i, j, self.dil, self.strides, self.out_hw),
                            self.taps[i, j], out=self.tmp)
                self.acc += self.tmp
        o = self.acc.shape[-1]
        self.stage(self.acc.reshape(-1, o), outputs[0].reshape(-1, o))
