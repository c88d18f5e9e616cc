"""DepthwiseConv2d, fast int8: one compiled loop per output row, split across the compute pool
by output rows. The reference (mace/ops/int8/depthwise_conv2d.py) makes kh*kw float64 passes.

Where the sums provably fit int32 (|bias| + kh * kw * 255 * 255 < 2^31, so the reference's
int32 clip is a no-op) and each output channel reads its own input channel (multiplier 1:
every depthwise conv of MobileNet v2 and ShuffleNet), _qloops.qdepthwise32 accumulates in
int32 lanes (int16 taps: the products fit vpmaddwd) and requantizes per channel in the same
call, a 3x3 filter's interior pixels 16 channels at a time in explicit 512-bit vectors;
otherwise _qloops.qdepthwise does the same in int64, one channel at a time.
"""
from __future__ import annotations

import numpy as np

from mace.ops.fast._pool import loop
from mace.ops.fast.int8._qgemm import channel_values
from mace.ops.fast.int8._qjit import qloops
from mace.ops.fast.int8.conv2d import quantized_weights
from mace.ops.int8._gemm import centred
from mace.ops.int8.depthwise_conv2d import DepthwiseConv2dInt8
from mace.ops.registry import kernel

INT32_MAX = 2**31 - 1


def stage_columns(stage, channels: int) -> tuple:
    """(bias, multiplier, left shift, right shift) int64 per channel, as requantize applies them."""
    bias = np.zeros(channels, np.int64) if stage.bias is None else channel_values(stage.bias, channels)
    mult, shift = channel_values(stage.multiplier, channels), channel_values(stage.shift, channels)
    left = np.maximum(1 - shift, 0)
    return bias, mult, left, shift + left


def fits_int32(taps: np.ndarray, bias: np.ndarray) -> bool:
    """Whether bias + the products of the raw codes (0..255) with the taps, and bias + those
    of the centred codes, stay inside int32 at every partial sum, for any input: then
    qdepthwise32's int32 lanes hold the reference's int64 values exactly."""
    per_tap = int(np.abs(taps).max(initial=0)) * 255
    bound = int(np.abs(bias).max(initial=0)) + 2 * per_tap * taps.shape[0] * taps.shape[1]
    return bound < INT32_MAX


@kernel("DepthwiseConv2d", "int8:fast")
class DepthwiseConv2dInt8Fast(DepthwiseConv2dInt8):
    @staticmethod
    def accepts(ctx) -> bool:
        return qloops() is not None and DepthwiseConv2dInt8.accepts(ctx) and quantized_weights(ctx)

    def setup(self, ctx):
        super().setup(ctx)
        del self.xp, self.inner, self.acc, self.tmp   # the reference's float64 buffers: unused here
        taps = centred(ctx.consts[1], ctx.input_quant[1])[:, 0].transpose(1, 2, 0)
        w = np.ascontiguousarray(taps, np.int64)
        self.zx = int(ctx.input_quant[0].zero_point)
        bias, mult, left, shift = stage_columns(self.stage, w.shape[2])
        # the int32 loop: multiplier 1, int32-exact sums and no multiplier >= 1 (left shift)
        self.int32 = (self.mult == 1 and fits_int32(w, bias) and not left.any()
                      and int(mult.max(initial=0)) <= INT32_MAX)
        if self.int32:
            rnd = np.left_shift(np.int64(1), shift - 1)
            fold = bias - self.zx * w.sum(axis=(0, 1))   # the 3x3 interior's zero-point share
            i32 = lambda a: a.astype(np.int32)   # noqa: E731
            taps16 = w.astype(np.int16)   # centred int8 (or uint8) taps: within +-255
            self.name, self.columns = "qdepthwise32", (taps16, i32(bias), i32(fold), i32(mult), shift, rnd)
        else:
            self.name, self.columns = "qdepthwise", (w, bias, mult, left, shift)

    def bind(self, inputs, outputs, scratch=None):
        out = outputs[0]
        n, oh, ow, o = out.shape
        geometry = (*self.strides, *self.dil, self.pads[0], self.pads[1])
        if self.int32:
            args = (inputs[0], self.zx, *self.columns, self.stage.zero, self.stage.qmin, self.stage.qmax,
                    *geometry, out)
        else:
            args = (inputs[0], self.zx, *self.columns, self.stage.zero, self.stage.qmin, self.stage.qmax,
                    *geometry, self.mult, out)
        taps = self.columns[0].shape[0] * self.columns[0].shape[1]
        return loop(self.name, args, n * oh, out.size * taps, lib=qloops())

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()
