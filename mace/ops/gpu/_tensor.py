"""Shared bases of the GPU data-movement kernels (tensor.cl): resize, space/depth, gathers."""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg
from mace.ops.gpu.elementwise import pixel_gws
from mace.ops.gpu.images import as_nhwc, cdiv
from mace.ops.gpu.kernel import GpuKernel, i32, tensors

# Where each logical axis of a rank-r tensor sits in its NHWC view (images.as_nhwc).
NHWC_AXES = {4: (0, 1, 2, 3), 3: (0, 2, 3), 2: (0, 3), 1: (3,)}


def nhwc_4d(op, shapes, what="") -> str | None:
    if len(shapes[0]) != 4 or get_arg(op, "data_format", "NHWC") != "NHWC":
        return f"not a 4-D NHWC {what}".rstrip()
    return None


class ResizeGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        return super().check(ctx) or nhwc_4d(op, shapes, "resize")

    def table(self, values, dtype):
        cl = self.gpu.cl
        host = np.ascontiguousarray(values, dtype)
        return cl.Buffer(self.gpu.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                         hostbuf=host)

    def _bind_resize(self, name, tables, n, h, w, oh, ow, c):
        """Build resize kernel `name` over index/weight `tables`, one work item per output pixel."""
        self.name, self.tables = name, tables
        self.k = self.kernel("tensor", name)
        self.k.set_args(self.image_in(0), self.outs[0].image, *tables, *i32(h, w, oh, ow, n * oh, cdiv(c, 4)))
        self.gws = (ow * cdiv(c, 4), n * oh)

    def enqueue(self):
        self.launch(self.k, self.name, self.gws)


class SpaceDepthGpu(GpuKernel):
    to_space = 0

    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        return super().check(ctx) or nhwc_4d(op, shapes, "tensor")

    def prepare(self, ctx):
        _, h, w, c = ctx.input_shapes[0]
        n, oh, ow, oc = ctx.output_shapes[0]
        self.k = self.kernel("tensor", "space_depth")
        self.k.set_args(self.image_in(0), self.outs[0].image,
                        *i32(h, w, c, oh, ow, oc, n * oh, int(ctx.arg("block_size")),
                             int(ctx.arg("mode", "DCR") == "CRD"), self.to_space))
        self.gws = pixel_gws(ctx.output_shapes[0])

    def enqueue(self):
        self.launch(self.k, "space_depth", self.gws)


def strides(shape) -> list:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= d
    return strides


class GatherGpu(GpuKernel):
    """Output element -> logical index -> input element (gather_permute in tensor.cl)."""

    def bind(self, ctx, out_logical, in_strides):
        pad = 4 - len(out_logical)
        dims = [1] * pad + list(out_logical)
        strides = [0] * pad + list(in_strides)
        _, h, w, c = as_nhwc(ctx.input_shapes[0])
        self.k = self.kernel("tensor", "gather_permute")
        self.k.set_args(self.image_in(0), self.outs[0].image,
                        *i32(h, w, c, *as_nhwc(ctx.output_shapes[0]), *dims, *strides))
        self.gws = pixel_gws(ctx.output_shapes[0])

    def enqueue(self):
        self.launch(self.k, "gather_permute", self.gws)
