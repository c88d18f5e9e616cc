"""Deconv2D (transposed convolution) on the GPU: group 1, constant filter, any pads/strides."""

import numpy as np

from mace.ir.args import get_arg
from mace.ops.deconv2d import deconv_geometry
from mace.ops.gpu.conv2d import bias_image, conv_reason
from mace.ops.gpu.images import cdiv, conv_filter_size
from mace.ops.gpu.kernel import GpuKernel, act_args, i32, image_fits, tensors
from mace.ops.registry import kernel


@kernel("Deconv2D", "gpu")
class Deconv2DGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx) or conv_reason(op, shapes, consts)
        if reason:
            return reason
        if get_arg(op, "group", 1) != 1:
            return "grouped transposed convolution"
        ci, co, kh, kw = consts[1].shape
        if not image_fits(conv_filter_size((co, ci, kh, kw))):
            return "filter too large for a 2-D image"
        return None

    def prepare(self, ctx):
        w = np.asarray(ctx.consts[1], np.float32)
        (n, h, wd, c), (kh, kw), s, d, pads, (oh, ow), co = deconv_geometry(ctx, ctx.input_shapes[0],
                                                                          w.shape)
        # the IR keeps ONNX's (C_in, C_out, kh, kw); the kernel reads the OIHW view
        self.filter = self.upload(np.ascontiguousarray(w.transpose(1, 0, 2, 3)), "filter")
        self.bias, has_bias = bias_image(self, ctx, 2, co)
        self.k = self.kernel("conv2d", "deconv2d")
        self.k.set_args(self.image_in(0), self.filter, self.bias, self.outs[0].image,
                        *i32(h, wd, c, oh, ow, co, n * oh, kh, kw, s[0], s[1], d[0], d[1], pads[0],
                             pads[1], has_bias), *act_args(ctx))
        self.gws = (cdiv(co, 4), ow, n * oh)

    def enqueue(self):
        self.launch(self.k, "deconv2d", self.gws)
