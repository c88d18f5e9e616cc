"""Softmax (and LogSoftmax) over channels on the GPU."""
from __future__ import annotations

from mace.ir.args import get_arg
from mace.ops._common import normalize_axis
from mace.ops.gpu.images import as_nhwc
from mace.ops.gpu.kernel import GpuKernel, i32, tensors
from mace.ops.registry import kernel


@kernel("Softmax", "gpu")
class SoftmaxGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx)
        if reason:
            return reason
        rank = len(shapes[0])
        if not rank or normalize_axis(get_arg(op, "axis", -1), rank) != rank - 1:
            return "softmax over an axis other than the last"
        return None

    def prepare(self, ctx):
        n, h, w, c = as_nhwc(ctx.input_shapes[0])
        self.k = self.kernel("tensor", "softmax")
        self.k.set_args(self.image_in(0), self.outs[0].image,
                        *i32(w, n * h, c, int(bool(ctx.arg("use_log")))))
        self.gws = (w, n * h)

    def enqueue(self):
        self.launch(self.k, "softmax", self.gws)
