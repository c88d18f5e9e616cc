"""DepthwiseConv2d, fast int8: one compiled loop (_qloops.qdepthwise) accumulating the centred
taps in int64 per output row and requantizing in the same pass, split across the compute pool
by output rows. The reference (mace/ops/int8/depthwise_conv2d.py) makes kh*kw float64 passes."""
from __future__ import annotations

import numpy as np

from mace.ops.fast._pool import loop
from mace.ops.fast.int8._qgemm import channel_values
from mace.ops.fast.int8._qjit import qloops
from mace.ops.fast.int8.conv2d import quantized_weights
from mace.ops.int8._gemm import OutputStage, centred
from mace.ops.int8.depthwise_conv2d import DepthwiseConv2dInt8
from mace.ops.registry import kernel


def stage_columns(stage, channels: int) -> tuple:
    """(bias, multiplier, left shift, right shift) int64 per channel, as requantize applies them."""
    bias = np.zeros(channels, np.int64) if stage.bias is None else channel_values(stage.bias, channels)
    mult, shift = channel_values(stage.multiplier, channels), channel_values(stage.shift, channels)
    left = np.maximum(1 - shift, 0)
    return bias, mult, left, shift + left


@kernel("DepthwiseConv2d", "int8:fast")
class DepthwiseConv2dInt8Fast(DepthwiseConv2dInt8):
    @staticmethod
    def accepts(ctx) -> bool:
        return qloops() is not None and DepthwiseConv2dInt8.accepts(ctx) and quantized_weights(ctx)

    def setup(self, ctx):
        super().setup(ctx)
        del self.xp, self.inner, self.acc, self.tmp   # the reference's float64 buffers: unused here
        taps = centred(ctx.consts[1], ctx.input_quant[1])[:, 0].transpose(1, 2, 0)
        self.w = np.ascontiguousarray(taps, np.int64)
        o = self.w.shape[2]
        self.zx = int(ctx.input_quant[0].zero_point)
        bias, mult, left, shift = stage_columns(self.stage, o)
        # the 3x3 interior's int32 form: x's zero point folded into the bias, taken where the
        # int32 clip and the left shift are provably no-ops
        fold = bias - self.zx * self.w.sum(axis=(0, 1))
        bound = np.abs(fold).max(initial=0) + self.w.shape[0] * self.w.shape[1] * 255 * 255
        short = bool(not left.any() and bound < 2**31 - 1)
        rnd = np.left_shift(np.int64(1), shift - 1)
        i32 = (lambda a: a.astype(np.int32)) if short else (lambda a: np.zeros(a.shape, np.int32))
        self.columns = (i32(self.w), i32(fold), bias, mult, i32(mult), left, shift, rnd, short)

    def bind(self, inputs, outputs, scratch=None):
        out = outputs[0]
        n, oh, ow, o = out.shape
        args = (inputs[0], self.zx, self.w, *self.columns, self.stage.zero, self.stage.qmin,
                self.stage.qmax, *self.strides, *self.dil, self.pads[0], self.pads[1], self.mult, out)
        return loop("qdepthwise", args, n * oh, out.size * self.w.shape[0] * self.w.shape[1], lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()
