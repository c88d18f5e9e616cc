"""Conv2D, int8: im2col of the centred uint8 input, one exact float64 GEMM per group.

Filter OIHW quantized per output channel (axis 0), bias int32 (input 2), fused
RELU/RELUX as the output clamp. Geometry is the float kernel's (mace/ops/conv2d.py);
the padded buffer holds x_q - x_zero, so its 0.0 pads are the input zero point.
"""
import numpy as np

from mace.ops.conv2d import conv_geometry, padded_buffer, window
from mace.ops.int8._gemm import OutputStage, WeightedInt8Kernel, centred
from mace.ops.registry import kernel


@kernel("Conv2D", "int8")
class Conv2DInt8(WeightedInt8Kernel):
    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC", "CPU Conv2D runs NHWC (to_nhwc pass)"
        wq = ctx.consts[1]
        geo = conv_geometry(ctx, ctx.input_shapes[0], wq.shape)
        self.in_shape, (kh, kw), self.strides, self.dil, self.pads, self.out_hw = geo
        n, _, _, c = self.in_shape
        o, cg = wq.shape[0], wq.shape[1]
        self.group = g = c // cg
        self.k, self.o = (kh, kw), o
        # [group, kh*kw*Cg, O/group], taps-major to match the columns below.
        w = centred(wq, ctx.input_quant[1]).reshape(g, o // g, cg, kh, kw).transpose(0, 3, 4, 2, 1)
        self.wmat = np.ascontiguousarray(w.reshape(g, kh * kw * cg, o // g))
        self.zero = self.input_zero(ctx)
        self.xp = padded_buffer(self.in_shape, self.pads, 0.0, np.float64)
        m = n * self.out_hw[0] * self.out_hw[1]
        self.pointwise = (kh, kw) == (1, 1) and self.strides == [1, 1] and not any(self.pads) and g == 1
        # A pointwise conv multiplies the centred input itself; others go through columns.
        self.cols = self.xp.reshape(1, m, c) if self.pointwise else np.empty((g, m, kh * kw * cg))
        self.acc = np.empty((m, o))
        self.gacc = np.empty((g, m, o // g)) if g > 1 else None
        self.stage = OutputStage(ctx, ctx.input_quant[1], o, self.bias_input)

    def run(self, inputs, outputs):
        p, (_, h, w, _) = self.pads, self.in_shape
        np.subtract(inputs[0], self.zero, out=self.xp[:, p[0]:p[0] + h, p[1]:p[1] + w, :])
        if not self.pointwise:
            self._im2col()
        if self.group == 1:
            np.matmul(self.cols[0], self.wmat[0], out=self.acc)
        else:
            np.matmul(self.cols, self.wmat, out=self.gacc)
            self.acc.reshape(-1, self.group, self.o // self.group)[...] = self.gacc.transpose(1, 0, 2)
        self.stage(self.acc, outputs[0].reshape(-1, self.o))

    def _im2col(self):
        g, (kh, kw) = self.group, self.k
        n, _, _, c = self.in_shape
        oh, ow = self.out_hw
        cols = self.cols.reshape(g, n, oh, ow, kh, kw, c // g)
        for i in range(kh):
            for j in range(kw):
                win = window(self.xp, i, j, self.dil, self.strides, self.out_hw)
                cols[:, :, :, :, i, j, :] = win.reshape(n, oh, ow, g, c // g).transpose(3, 0, 1, 2, 4)
