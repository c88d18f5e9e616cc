"""Concat on channels on the GPU (four inputs per launch)."""
from __future__ import annotations

from mace.ir.args import get_arg
from mace.ops._common import normalize_axis
from mace.ops.gpu.images import as_nhwc, cdiv
from mace.ops.gpu.kernel import GpuKernel, i32, tensors
from mace.ops.registry import kernel


@kernel("Concat", "gpu")
class ConcatGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx)
        if reason:
            return reason
        rank = len(shapes[0])
        if normalize_axis(get_arg(op, "axis"), rank) != rank - 1:
            return "concat on an axis other than the last (channels)"
        return None

    def prepare(self, ctx):
        out = ctx.output_shapes[0]
        n, h, w, c = as_nhwc(out)
        imgs = [self.image_in(i) for i in range(len(ctx.input_shapes))]
        chans = [s[-1] for s in ctx.input_shapes]
        self.steps = []
        # Four inputs per launch; more are folded into a scratch image first.
        while len(imgs) > 4:
            part = self.scratch(w * cdiv(sum(chans[:4]), 4), n * h)
            self._step(imgs[:4], chans[:4], part, w, n * h)
            imgs, chans = [part] + imgs[4:], [sum(chans[:4])] + chans[4:]
        self._step(imgs, chans, self.outs[0].image, w, n * h)

    def _step(self, imgs, chans, out, w, height):
        k = self.kernel("tensor", "concat")
        pad = 4 - len(imgs)
        k.set_args(*imgs, *[self.dummy()] * pad, out, *i32(w, height, *chans, *[0] * pad))
        self.steps.append((k, (w * cdiv(sum(chans), 4), height)))

    def enqueue(self):
        for k, gws in self.steps:
            self.launch(k, "concat", gws)
