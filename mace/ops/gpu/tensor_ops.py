"""Data-movement ops on the GPU: Concat on channels, Softmax over channels, ResizeBilinear,
ResizeNearestNeighbor, Pad, SpaceToDepth, DepthToSpace, Reshape and Transpose."""

import numpy as np

from mace.ops import concat, depth_to_space, reshape, softmax, space_to_depth, transpose  # noqa: F401 (registers the op types first)
from mace.ir.args import get_arg
from mace.ops._common import normalize_axis
from mace.ops._resize import axis_params
from mace.ops.pad import split_paddings
from mace.ops.registry import kernel
from mace.ops.resize_bilinear import linear_table
from mace.ops.resize_nearest import nearest_index
from mace.ops.gpu.images import as_nhwc, cdiv
from mace.ops.gpu.kernel import GpuKernel, i32
from mace.ops.gpu.elementwise import pixel_gws

# Where each logical axis of a rank-r tensor sits in its NHWC view (images.as_nhwc).
NHWC_AXES = {4: (0, 1, 2, 3), 3: (0, 2, 3), 2: (0, 3), 1: (3,)}
PAD_MODES = {"CONSTANT": 0, "REFLECT": 1, "SYMMETRIC": 2, "EDGE": 3, "WRAP": 4}


def nhwc_4d(op, shapes, what="") -> str | None:
    if len(shapes[0]) != 4 or get_arg(op, "data_format", "NHWC") != "NHWC":
        return f"not a 4-D NHWC {what}".rstrip()
    return None


@kernel("Concat", "gpu")
class ConcatGpu(GpuKernel):
    @classmethod
    def unsupported(cls, op, shapes, dtypes, consts):
        reason = super().unsupported(op, shapes, dtypes, consts)
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


@kernel("Softmax", "gpu")
class SoftmaxGpu(GpuKernel):
    @classmethod
    def unsupported(cls, op, shapes, dtypes, consts):
        reason = super().unsupported(op, shapes, dtypes, consts)
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
                        *i32(w, n * h, c, int(bool(ctx.arg("use_log", 0)))))
        self.gws = (w, n * h)

    def enqueue(self):
        self.launch(self.k, "softmax", self.gws)


class _ResizeGpu(GpuKernel):
    @classmethod
    def unsupported(cls, op, shapes, dtypes, consts):
        return super().unsupported(op, shapes, dtypes, consts) or nhwc_4d(op, shapes, "resize")

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


@kernel("ResizeBilinear", "gpu")
class ResizeBilinearGpu(_ResizeGpu):
    def prepare(self, ctx):
        n, h, w, c = ctx.input_shapes[0]
        (axes, mode) = axis_params(ctx, ctx.input_shapes[0])
        (_, oh, sh), (_, ow, sw) = axes
        r_lo, r_hi, _, r_w = linear_table(h, oh, sh, mode)
        c_lo, c_hi, _, c_w = linear_table(w, ow, sw, mode)
        tables = [self.table(r_lo, np.int32), self.table(r_hi, np.int32), self.table(r_w, np.float32),
                  self.table(c_lo, np.int32), self.table(c_hi, np.int32), self.table(c_w, np.float32)]
        self._bind_resize("resize_bilinear", tables, n, h, w, oh, ow, c)


@kernel("ResizeNearestNeighbor", "gpu")
class ResizeNearestGpu(_ResizeGpu):
    def prepare(self, ctx):
        n, h, w, c = ctx.input_shapes[0]
        (axes, mode) = axis_params(ctx, ctx.input_shapes[0])
        nearest = ctx.arg("nearest_mode", "round_prefer_floor")
        rows, cols = (nearest_index(i, o, s, mode, nearest) for i, o, s in axes)
        tables = [self.table(rows, np.int32), self.table(cols, np.int32)]
        self._bind_resize("resize_nearest", tables, n, h, w, len(rows), len(cols), c)


@kernel("Pad", "gpu")
class PadGpu(GpuKernel):
    @classmethod
    def unsupported(cls, op, shapes, dtypes, consts):
        reason = super().unsupported(op, shapes, dtypes, consts)
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
                        np.int32(PAD_MODES[ctx.arg("pad_type", "CONSTANT")]),
                        np.float32(ctx.arg("constant_value", 0.0)))
        self.gws = pixel_gws(ctx.output_shapes[0])

    def enqueue(self):
        self.launch(self.k, "pad", self.gws)


class _SpaceDepthGpu(GpuKernel):
    to_space = 0

    @classmethod
    def unsupported(cls, op, shapes, dtypes, consts):
        return super().unsupported(op, shapes, dtypes, consts) or nhwc_4d(op, shapes, "tensor")

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


@kernel("SpaceToDepth", "gpu")
class SpaceToDepthGpu(_SpaceDepthGpu):
    to_space = 0


@kernel("DepthToSpace", "gpu")
class DepthToSpaceGpu(_SpaceDepthGpu):
    to_space = 1


def _strides(shape) -> list:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= d
    return strides


class _GatherGpu(GpuKernel):
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


@kernel("Reshape", "gpu")
class ReshapeGpu(_GatherGpu):
    def prepare(self, ctx):
        out = ctx.output_shapes[0]
        self.bind(ctx, out, _strides(out))   # same flat index on both sides


@kernel("Transpose", "gpu")
class TransposeGpu(_GatherGpu):
    @classmethod
    def unsupported(cls, op, shapes, dtypes, consts):
        reason = super().unsupported(op, shapes, dtypes, consts)
        if reason:
            return reason
        return None if len(shapes[0]) >= 1 else "a scalar transpose"

    def prepare(self, ctx):
        perm = list(ctx.arg("dims", []) or range(len(ctx.input_shapes[0]))[::-1])  # out i = in dims[i]
        in_strides = _strides(ctx.input_shapes[0])
        self.bind(ctx, ctx.output_shapes[0], [in_strides[p] for p in perm])
