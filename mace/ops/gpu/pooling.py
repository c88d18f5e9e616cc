"""Pooling (max / average) and Reduce over H, W on the GPU."""

from mace.ir.args import get_arg
from mace.ops.gpu.images import cdiv
from mace.ops.gpu.kernel import GpuKernel, i32, tensors
from mace.ops.pooling import pool_geometry
from mace.ops.reduce import reduce_axes
from mace.ops.registry import kernel


@kernel("Pooling", "gpu")
class PoolingGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx)
        if reason:
            return reason
        if get_arg(op, "data_format", "NHWC") != "NHWC" or len(shapes[0]) != 4:
            return "not a 4-D NHWC pooling"
        if get_arg(op, "pooling_type", "MAX") not in ("MAX", "AVG"):
            return f"pooling_type {get_arg(op, 'pooling_type')}"
        return None

    def prepare(self, ctx):
        (n, h, w, c), k, s, d, pads, (oh, ow) = pool_geometry(ctx, ctx.input_shapes[0])
        is_max = ctx.arg("pooling_type") == "MAX"
        include = int(bool(ctx.arg("count_include_pad")))
        self.k = self.kernel("pooling", "pooling")
        self.k.set_args(self.image_in(0), self.outs[0].image,
                        *i32(h, w, c, oh, ow, n * oh, k[0], k[1], s[0], s[1], d[0], d[1], pads[0],
                             pads[1], is_max, include, h + pads[0] + pads[2], w + pads[1] + pads[3]))
        self.gws = (cdiv(c, 4), ow, n * oh)

    def enqueue(self):
        self.launch(self.k, "pooling", self.gws)


REDUCE_KINDS = {"MEAN": 0, "SUM": 1, "MAX": 2, "MIN": 3}


@kernel("Reduce", "gpu")
class ReduceGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx)
        if reason:
            return reason
        if get_arg(op, "reduce_type", "") not in REDUCE_KINDS:
            return f"reduce_type {get_arg(op, 'reduce_type', '')}"
        if len(shapes[0]) != 4 or reduce_axes(lambda a, dflt=None: get_arg(op, a, dflt), 4) != (1, 2):
            return "only reductions over H and W of a 4-D tensor"
        return None

    def prepare(self, ctx):
        n, h, w, c = ctx.input_shapes[0]
        self.k = self.kernel("pooling", "reduce_hw")
        self.k.set_args(self.image_in(0), self.outs[0].image,
                        *i32(h, w, c, n, REDUCE_KINDS[ctx.arg("reduce_type")]))
        self.gws = (cdiv(c, 4), n)

    def enqueue(self):
        self.launch(self.k, "reduce_hw", self.gws)
