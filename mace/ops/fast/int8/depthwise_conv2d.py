"""DepthwiseConv2d, fast int8: one compiled loop per output row, split across the compute pool
by output rows. The reference (mace/ops/int8/depthwise_conv2d.py) makes kh*kw float64 passes.

Where the sums provably fit int32 (|bias| + kh * kw * 255 * 255 < 2^31, so the reference's
int32 clip is a no-op) and each output channel reads its own input channel (multiplier 1:
every depthwise conv of MobileNet v2 and ShuffleNet), _qloops.qdepthwise32 accumulates in
int32 lanes (int16 taps: the products fit vpmaddwd) and requantizes per channel in the same
call, a 3x3 filter's interior pixels 16 channels at a time in explicit 512-bit vectors, or,
with 64 channels or more and int8 taps, 64 at a time by vpdpbusd: the nine taps' codes
regrouped into quads (four taps of a channel per int32 lane) by lane-wise unpacks, against
taps packed the same way at load (`quad_blocks`); otherwise _qloops.qdepthwise does the
same in int64, one channel at a time.
"""
from __future__ import annotations

import numpy as np

from mace.ops.fast._checks import NO_LOOPS
from mace.ops.fast.compute import compute_of
from mace.ops._common import sequence
from mace.ops.fast.int8._qgemm import channel_values, table_step
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


def quad_blocks(w, fold, mult, rnd, shift, stride_w: int) -> tuple:
    """(quads uint8 [B, QUAD_BYTES], starts int64 [B]) for _qloops._dw3x3q: per block of 64
    channels (the last one ending at the last channel), the 3x3 taps as int8 quads in the
    order its lane-wise unpacks leave the channels (lane 4L + j of vector r is channel
    16L + 4r + j), then fold, mult, rnd, shift in that order. 16 or 32 channels at stride 1:
    one block of 64 / o pixels' channels in turn. Empty (the 16-channel path) for other
    filters and channel counts, taps outside int8 (uint8 weights' centred taps), or a target
    without vpdpbusd (the quads' plain-IR form is exact but slower than the 16-channel path)."""
    lib = qloops()
    kh, kw, o = w.shape
    fits = o >= 64 or (o in (16, 32) and stride_w == 1)
    if not lib.VNNI or (kh, kw) != (3, 3) or not fits or w.min() < -128 or w.max() > 127:
        return np.zeros((0, lib.QUAD_BYTES), np.uint8), np.zeros(0, np.int64)
    starts = list(range(0, o - 63, 64)) + ([o - 64] if o % 64 else []) if o >= 64 else [0]
    lane = np.arange(16)
    order = 16 * (lane // 4)[None, :] + 4 * np.arange(4)[:, None] + (lane % 4)[None, :]   # [r, lane]
    w12 = np.zeros((12, o), np.int64)
    w12[:9] = w.reshape(9, o)
    quads = np.zeros((len(starts), lib.QUAD_BYTES), np.uint8)
    for b, cb in enumerate(starts):
        ch = (cb + order) % o   # under 64 channels: the next pixels' channels
        taps = w12.reshape(3, 4, o)[:, :, ch].transpose(0, 2, 3, 1)   # [group, r, lane, tap in quad]
        parts = [taps.astype(np.int8), fold[ch].astype(np.int32), mult[ch].astype(np.int32),
                 rnd[ch].astype(np.int64), shift[ch].astype(np.int64)]
        quads[b] = np.frombuffer(b"".join(a.tobytes() for a in parts), np.uint8)
    return quads, np.array(starts, np.int64)


@kernel("DepthwiseConv2d", "int8:fast")
class DepthwiseConv2dInt8Fast(DepthwiseConv2dInt8):
    @staticmethod
    def check(ctx) -> str | None:
        return NO_LOOPS if qloops() is None else DepthwiseConv2dInt8.check(ctx) or quantized_weights(ctx)

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
            quads, starts = quad_blocks(w, fold, mult, rnd, shift, self.strides[1])
            self.name = "qdepthwise32"
            self.columns = (taps16, i32(bias), i32(fold), i32(mult), shift, rnd, quads, starts)
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
        step = compute_of(self.ctx).loop(self.name, args, n * oh, out.size * taps, lib=qloops())
        table = table_step(compute_of(self.ctx), qloops(), self.stage, out)
        return step if table is None else sequence([step, table])

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()
