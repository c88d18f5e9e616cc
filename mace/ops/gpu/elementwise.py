"""Element-wise ops on the GPU: Eltwise (binary with per-channel / per-(n, c) / scalar
broadcasting, unary), Activation (PReLU included), BatchNorm and FakeQuantize."""

import numpy as np

from mace.ops.fake_quantize import grid
from mace.ir.args import get_arg
from mace.ops.gpu.images import as_nhwc, cdiv
from mace.ops.gpu.kernel import ACTIVATIONS, GpuKernel, act_args, fusable, i32, tensors
from mace.ops.registry import kernel

BINARY = {"SUM": 0, "SUB": 1, "PROD": 2, "DIV": 3, "MIN": 4, "MAX": 5, "SQR_DIFF": 6, "POW": 7,
          "MEAN": 8}
UNARY = {"NEG": 0, "ABS": 1, "SQRT": 2, "RSQRT": 3, "EXP": 4, "LOG": 5, "RECIPROCAL": 6,
         "SQUARE": 7, "FLOOR": 8, "CEIL": 9, "ROUND": 10, "SIGN": 11, "SIN": 12, "COS": 13,
         "ERF": 14}
FULL, CHANNEL, SCALAR, BATCH_CHANNEL = 0, 1, 2, 3


def broadcast_mode(shape, out_shape, const) -> int | None:
    """How an operand of `shape` is read against the output (None: not supported)."""
    shape, out = tuple(shape), tuple(out_shape)
    if const is not None and const.size == 1:
        return SCALAR
    if shape == out:
        return FULL
    if len(shape) > len(out):
        return None
    padded = (1,) * (len(out) - len(shape)) + shape
    n, h, w, c = as_nhwc(out)
    if int(np.prod(padded)) == padded[-1] and padded[-1] == out[-1]:
        return CHANNEL if const is not None else BATCH_CHANNEL if n == 1 else None
    if len(out) == 4 and padded == (n, 1, 1, c):
        return BATCH_CHANNEL
    return None


def pixel_gws(shape) -> tuple:
    n, h, w, c = as_nhwc(shape)
    return (w * cdiv(c, 4), n * h)


@kernel("Eltwise", "gpu")
class EltwiseGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx) or fusable(op)
        if reason:
            return reason
        kind, n_in = get_arg(op, "type", ""), len(op.input)
        if kind in UNARY and n_in == 1:
            return None
        if kind not in BINARY or n_in != 2:
            return f"Eltwise {kind} with {n_in} inputs"
        out = shapes[n_in]
        for shape, const in zip(shapes[:2], consts[:2]):
            if broadcast_mode(shape, out, const) is None:
                return f"broadcast of {list(shape)} to {list(out)}"
        return None

    def prepare(self, ctx):
        kind, out = ctx.arg("type"), ctx.output_shapes[0]
        n, h, w, c = as_nhwc(out)
        self.gws = pixel_gws(out)
        if kind in UNARY:
            self.name = "eltwise_unary"
            self.k = self.kernel("eltwise", self.name)
            self.k.set_args(self.image_in(0), self.outs[0].image, *i32(*self.gws, w, c, UNARY[kind]),
                            *act_args(ctx))
            return
        args, modes, scalars = [], [], []
        for i in range(2):
            const = ctx.consts[i]
            mode = broadcast_mode(ctx.input_shapes[i], out, const)
            modes.append(mode)
            scalars.append(np.float32(const.reshape(-1)[0]) if mode == SCALAR else np.float32(0))
            if mode == SCALAR:
                args.append(self.dummy())
            elif mode == CHANNEL:
                args.append(self.upload(np.asarray(const, np.float32).reshape(-1), "arg"))
            else:
                args.append(self.image_in(i))
        self.name = "eltwise"
        self.k = self.kernel("eltwise", self.name)
        self.k.set_args(*args, self.outs[0].image, *i32(*self.gws, w, h, c, *modes), *scalars,
                        np.int32(BINARY[kind]), *act_args(ctx))

    def enqueue(self):
        self.launch(self.k, self.name, self.gws)


@kernel("Activation", "gpu")
class ActivationGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx)
        if reason:
            return reason
        kind = get_arg(op, "activation", "")
        if kind == "PRELU":
            if len(op.input) != 2 or broadcast_mode(shapes[1], shapes[2], consts[1]) is None:
                return "PRELU slope not per-channel, scalar or full"
            return None
        if len(op.input) != 1 or kind not in ACTIVATIONS or not kind:
            return f"activation {kind} has no GPU form"
        return None

    def prepare(self, ctx):
        out = ctx.output_shapes[0]
        n, h, w, c = as_nhwc(out)
        self.gws = pixel_gws(out)
        slope, mode, scalar = self.dummy(), -1, np.float32(0)
        if ctx.arg("activation") == "PRELU":
            const = ctx.consts[1]
            mode = broadcast_mode(ctx.input_shapes[1], out, const)
            if mode == SCALAR:
                scalar = np.float32(const.reshape(-1)[0])
            elif mode == CHANNEL:
                slope = self.upload(np.asarray(const, np.float32).reshape(-1), "arg")
            else:
                slope = self.image_in(1)
        self.k = self.kernel("eltwise", "activation")
        self.k.set_args(self.image_in(0), slope, self.outs[0].image, *i32(*self.gws, w, h, c),
                        *act_args(ctx), np.int32(mode), scalar)

    def enqueue(self):
        self.launch(self.k, "activation", self.gws)


@kernel("BatchNorm", "gpu")
class BatchNormGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx) or fusable(op)
        if reason:
            return reason
        if get_arg(op, "data_format", "NHWC") == "NCHW" and len(shapes[0]) > 2:
            return "NCHW BatchNorm"
        if consts[1] is None or consts[2] is None:
            return "scale/offset not constant"
        return None

    def prepare(self, ctx):
        out = ctx.output_shapes[0]
        n, h, w, c = as_nhwc(out)
        self.gws = pixel_gws(out)
        scale = self.upload(np.asarray(ctx.consts[1], np.float32).reshape(-1), "arg")
        offset = self.upload(np.asarray(ctx.consts[2], np.float32).reshape(-1), "arg")
        self.k = self.kernel("eltwise", "batch_norm")
        self.k.set_args(self.image_in(0), scale, offset, self.outs[0].image, *i32(*self.gws, w, c),
                        *act_args(ctx))

    def enqueue(self):
        self.launch(self.k, "batch_norm", self.gws)


@kernel("FakeQuantize", "gpu")
class FakeQuantizeGpu(GpuKernel):
    def prepare(self, ctx):
        scale, zero, qmin, qmax = grid(ctx.op)
        n, h, w, c = as_nhwc(ctx.output_shapes[0])
        self.gws = pixel_gws(ctx.output_shapes[0])
        self.k = self.kernel("eltwise", "fake_quantize")
        self.k.set_args(self.image_in(0), self.outs[0].image, *i32(*self.gws, w, c),
                        *(np.float32(v) for v in (scale, zero, qmin, qmax)))

    def enqueue(self):
        self.launch(self.k, "fake_quantize", self.gws)
