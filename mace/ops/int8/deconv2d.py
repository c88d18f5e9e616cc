"""Deconv2D, int8: one exact float64 GEMM per group gives every tap's contribution,
a scatter adds the kh*kw taps into the full result, the output is its crop.

The filter keeps ONNX's layout (C_in, C_out/group, kh, kw). It is quantized per output
channel (axis 1) for one group; grouped filters are per-tensor (their bias scale could
not follow a per-channel axis that repeats across groups). Geometry (pads, output size)
is the float kernel's deconv_geometry (mace/ops/deconv2d.py). The input is centred
first, so cells no tap reaches hold 0: real 0.0 before the bias.
"""
import numpy as np

from mace.ir.args import get_arg
from mace.ops.deconv2d import deconv_geometry
from mace.ops.int8._gemm import OutputStage, WeightedInt8Kernel, centred
from mace.ops.registry import kernel


@kernel("Deconv2D", "int8")
class Deconv2DInt8(WeightedInt8Kernel):
    @staticmethod
    def weight_inputs(op) -> dict:   # filter (C_in, C_out/group, kh, kw): per output channel
        return {1: 1 if int(get_arg(op, "group", 1)) == 1 else None}

    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC", "CPU Deconv2D runs NHWC (to_nhwc pass)"
        wq = ctx.consts[1]
        geo = deconv_geometry(ctx, ctx.input_shapes[0], wq.shape)
        (n, h, w, c), (kh, kw), self.strides, self.dil, pads, out_hw, self.c_out = geo
        self.in_shape, self.k = (n, h, w, c), (kh, kw)
        self.group = g = int(ctx.arg("group"))
        cin_g, cout_g = c // g, wq.shape[1]
        # [group, C_in/g, kh*kw*C_out/g]: one row of taps per input channel.
        wc = centred(wq, ctx.input_quant[1]).reshape(g, cin_g, cout_g, kh, kw).transpose(0, 1, 3, 4, 2)
        self.wmat = np.ascontiguousarray(wc.reshape(g, cin_g, kh * kw * cout_g))
        self.zero = self.input_zero(ctx)
        m = n * h * w
        self.xc = np.empty((g, m, cin_g))
        self.cols = np.empty((g, m, kh * kw * cout_g))
        # taps[n, y, x, i, j, group, C_out/g]: tap (i, j) of input pixel (y, x)
        self.taps = self.cols.reshape(g, n, h, w, kh, kw, cout_g).transpose(1, 2, 3, 4, 5, 0, 6)
        self._plan_scatter(pads, out_hw)
        self.acc = np.empty((n * out_hw[0] * out_hw[1], self.c_out))
        self.stage = OutputStage(ctx, ctx.input_quant[1], self.c_out, self.bias_input)

    def _plan_scatter(self, pads, out_hw):
        """A buffer covering every tap and the output (negative pads reach past the taps)."""
        n, h, w, _ = self.in_shape
        span = [self.strides[d] * (size - 1) + (self.k[d] - 1) * self.dil[d] + 1
                for d, size in enumerate((h, w))]
        lo = [min(0, pads[d]) for d in range(2)]
        hi = [max(span[d], pads[d] + out_hw[d]) for d in range(2)]
        self.origin = [-lo[0], -lo[1]]   # buffer index of full-result cell (0, 0)
        self.crop = tuple(slice(self.origin[d] + pads[d], self.origin[d] + pads[d] + out_hw[d])
                          for d in range(2))
        self.buf = np.empty((n, hi[0] - lo[0], hi[1] - lo[1], self.group, self.c_out // self.group))

    def run(self, inputs, outputs):
        g = self.group
        x = inputs[0].reshape(-1, g, self.in_shape[3] // g).transpose(1, 0, 2)
        np.subtract(x, self.zero, out=self.xc)
        np.matmul(self.xc, self.wmat, out=self.cols)
        self._scatter()
        out = self.buf[:, self.crop[0], self.crop[1]]
        self.acc.reshape(out.shape)[...] = out
        self.stage(self.acc, outputs[0].reshape(-1, self.c_out))

    def _scatter(self):
        _, h, w, _ = self.in_shape
        (kh, kw), s, d = self.k, self.strides, self.dil
        self.buf[...] = 0
        for i in range(kh):
            r0 = self.origin[0] + i * d[0]
            for j in range(kw):
                c0 = self.origin[1] + j * d[1]
                self.buf[:, r0:r0 + s[0] * (h - 1) + 1:s[0], c0:c0 + s[1] * (w - 1) + 1:s[1]] += \
                    self.taps[:, :, :, i, j]
