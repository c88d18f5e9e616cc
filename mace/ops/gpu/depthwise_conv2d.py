"""DepthwiseConv2d on the GPU: channel multiplier 1 (as MACE), depthwise filter layout."""

import numpy as np

from mace.ops.conv2d import conv_geometry
from mace.ops.gpu.conv2d import bias_image, conv_reason
from mace.ops.gpu.images import cdiv, dw_filter_size
from mace.ops.gpu.kernel import GpuKernel, act_args, i32, image_fits, tensors
from mace.ops.registry import kernel


@kernel("DepthwiseConv2d", "gpu")
class DepthwiseConv2dGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx) or conv_reason(op, shapes, consts)
        if reason:
            return reason
        if consts[1].shape[0] != shapes[0][3]:
            return "channel multiplier > 1"
        if not image_fits(dw_filter_size((1,) + tuple(consts[1].shape[:1]) + tuple(consts[1].shape[2:]))):
            return "filter too large for a 2-D image"
        return None

    def prepare(self, ctx):
        w = np.asarray(ctx.consts[1], np.float32)
        (n, h, wd, c), (kh, kw), s, d, pads, (oh, ow) = conv_geometry(ctx, ctx.input_shapes[0], w.shape)
        # IR filter (C, 1, kh, kw) is MIHW with M = 1, I = C
        self.filter = self.upload(w.reshape(1, c, kh, kw), "dw_filter")
        self.bias, has_bias = bias_image(self, ctx, 2, c)
        self.k = self.kernel("conv2d", "depthwise_conv2d")
        self.k.set_args(self.image_in(0), self.filter, self.bias, self.outs[0].image,
                        *i32(h, wd, c, oh, ow, c, n * oh, kh, kw, s[0], s[1], d[0], d[1], pads[0],
                             pads[1], has_bias), *act_args(ctx))
        self.gws = (cdiv(c, 4), ow, n * oh)

    def enqueue(self):
        self.launch(self.k, "depthwise_conv2d", self.gws)
