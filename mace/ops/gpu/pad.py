"""Pad on the GPU: constant, reflect, symmetric, edge and wrap modes."""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg
from mace.ops.gpu._tensor import NHWC_AXES
from mace.ops.gpu.elementwise import pixel_gws
from mace.ops.gpu.images import as_nhwc
from mace.ops.gpu.kernel import GpuKernel, i32, tensors
from mace.ops.pad import split_paddings
from mace.ops.registry import kernel

PAD_MODES = {"CONSTANT": 0, "REFLECT": 1, "SYMMETRIC": 2, "EDGE": 3, "WRAP": 4}


@kernel("Pad", "gpu")
class PadGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx)
        if reason:
            return reason
        mode = get_arg(op, "pad_type", "CONSTANT")
        if mode not in PAD_MODES:
            return f"pad_type {mode}"
        pairs = split_paddings(get_arg(op, "paddings"), len(shapes[0]))
        if mode != "CONSTANT" and min(min(p) for p in pairs) < 0:
            return f"{mode} padding with negative amounts"
        return None

    def prepare(self, ctx):
        rank = len(ctx.input_shapes[0])
        pairs = split_paddings(ctx.arg("paddings"), rank)
        begin = [0, 0, 0, 0]
        for axis, (b, _) in zip(NHWC_AXES[rank], pairs):
            begin[axis] = b
        src, out = as_nhwc(ctx.input_shapes[0]), as_nhwc(ctx.output_shapes[0])
        self.k = self.kernel("tensor", "pad")
        self.k.set_args(self.image_in(0), self.outs[0].image, *i32(*src, *out, *begin),
                        np.int32(PAD_MODES[ctx.arg("pad_type")]),
                        np.float32(ctx.arg("constant_value")))
        self.gws = pixel_gws(ctx.output_shapes[0])

    def enqueue(self):
        self.launch(self.k, "pad", self.gws)
