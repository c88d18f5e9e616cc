"""FullyConnected (a 1x1 convolution over the NHWC view, weight in the conv filter layout)
and MatMul (both operands images; batch dims equal, or one side 2-D) on the GPU."""

import numpy as np

from mace.ops.gpu.conv2d import bias_image
from mace.ops.gpu.images import as_nhwc, cdiv, channel_major_size, conv_filter_size
from mace.ops.gpu.kernel import GpuKernel, act_args, fusable, i32, image_fits, tensors
from mace.ops.registry import kernel


@kernel("FullyConnected", "gpu")
class FullyConnectedGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx) or fusable(op)
        if reason:
            return reason
        if consts[1] is None or (len(op.input) > 2 and consts[2] is None):
            return "weight or bias not constant"
        o, k = consts[1].shape
        if not image_fits(conv_filter_size((o, k, 1, 1))):
            return "weight too large for a 2-D image"
        return None

    def prepare(self, ctx):
        w = np.asarray(ctx.consts[1], np.float32)
        o, k = w.shape
        n, h, wd, _ = as_nhwc(ctx.input_shapes[0])
        self.filter = self.upload(w.reshape(o, k, 1, 1), "filter")
        self.bias, has_bias = bias_image(self, ctx, 2, o)
        self.k = self.kernel("conv2d", "conv2d_1x1")
        self.k.set_args(self.image_in(0), self.filter, self.bias, self.outs[0].image,
                        *i32(h, wd, k, h, wd, o, n * h, 1, 1, 1, 1, 1, 1, 0, 0, has_bias),
                        *act_args(ctx))
        self.gws = (cdiv(o, 4), cdiv(wd, 4), n * h)

    def enqueue(self):
        self.launch(self.k, "conv2d_1x1", self.gws)


def _batch(shape) -> int:
    return int(np.prod(shape[:-2], dtype=np.int64)) if len(shape) > 2 else 1


@kernel("MatMul", "gpu")
class MatMulGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx)
        if reason:
            return reason
        a, b = shapes[0], shapes[1]
        if len(a) < 2 or len(b) < 2:
            return "a 1-D MatMul operand"
        if len(a) > 2 and len(b) > 2 and tuple(a[:-2]) != tuple(b[:-2]):
            return "broadcast batch dims"
        if not all(image_fits(channel_major_size(as_nhwc(s))) for s in (a, b)):
            return "operand too large for a 2-D image"
        return None

    def prepare(self, ctx):
        a, b = ctx.input_shapes[0], ctx.input_shapes[1]
        out = ctx.output_shapes[0]
        ta, tb = int(bool(ctx.arg("transpose_a"))), int(bool(ctx.arg("transpose_b")))
        m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
        n = b[-2] if tb else b[-1]
        self.gws = (cdiv(n, 4), m, _batch(out))
        self.k = self.kernel("matmul", "matmul")
        self.k.set_args(self.image_in(0), self.image_in(1), self.outs[0].image,
                        *i32(m, n, k, _batch(out), ta, tb, len(a) == 2, len(b) == 2, len(out) == 2))

    def enqueue(self):
        self.launch(self.k, "matmul", self.gws)

