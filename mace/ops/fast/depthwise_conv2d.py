"""DepthwiseConv2d, fast CPU kernel (channel multiplier 1): one compiled loop, or numpy taps.

With numba (mace/ops/fast/_jit.py) one loop (_loops.depthwise) does taps,
padding, bias and the activation (a clip, or any with a compiled loop over each
row as it is stored: _base.store_epilogue) in a single pass, no scratch (MobileNet v2
shapes, 1 thread: 112x112x32 0.31 ms, 56x56x144 0.20 ms, against 1.6 and 1.06 ms
for the numpy path on 2 threads). A 3x3 filter's interior pixels run 16 channels at a
time with the nine taps held in registers (_loops._dw_pixels; 112x112x16: 0.19 -> 0.06
ms, the same bytes), so the loop wants its bias contiguous. Without numba, over the (padded) NHWC input,
each of the kh*kw taps is a strided window scaled per channel. Below
EINSUM_MIN_CHANNELS the taps run as numpy multiply + add pairs; above, one
einsum over an as_strided window view does the whole sum in a single pass
(MobileNet v2 shapes: 0.72 vs 0.97 ms at 56x56x96 stride 2, but 1.95 vs 1.39 ms
at 112x112x32).
"""
from __future__ import annotations

from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mace.ops._common import activation_args, sequence
from mace.ops.fast._base import (NO_STORE, FastKernel, activation_fn, carve, clip_bounds, compiled_in_place,
                                 fused_slope, loop_bias, scratch_size, store_epilogue)
from mace.ops.fast._conv_gemm import pad_steps
from mace.ops.fast._jit import loops, op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.fast.conv2d import const_bias, conv_check, epilogue, geometry
from mace.ops.registry import kernel

EINSUM_MIN_CHANNELS = 64


def depthwise_check(ctx) -> str | None:
    return conv_check(ctx) or (None if ctx.consts[1].shape[0] == ctx.input_shapes[0][3] else
                               f"{ctx.consts[1].shape[0]} filter channels for {ctx.input_shapes[0][3]} input "
                               "channels (channel multiplier 1 only)")


@kernel("DepthwiseConv2d", "cpu:fast")
class DepthwiseConv2dFast(FastKernel):
    check = staticmethod(depthwise_check)

    def setup(self, ctx):
        self.geo = g = geometry(ctx, ctx.consts[1].shape)
        # taps[i, j] is tap (i, j)'s weight per channel
        self.taps = np.ascontiguousarray(np.asarray(ctx.consts[1], np.float32)[:, 0].transpose(1, 2, 0))
        self.bias = const_bias(ctx)
        self.slope = fused_slope(ctx)   # kept: the store step reads it by address
        self.act = activation_fn(activation_args(ctx), slope=self.slope)
        self.compiled = loops() is not None
        if self.compiled:
            self._setup_loop(activation_args(ctx))
            return
        self.use_einsum = g.c >= EINSUM_MIN_CHANNELS
        self.specs = [] if self.use_einsum else [((g.n, g.oh, g.ow, g.c), np.float32)]
        if any(g.pads):
            self.specs.append(((g.n,) + g.padded_hw + (g.c,), np.float32))
        self.scratch_nbytes = scratch_size(self.specs)

    def _setup_loop(self, act):
        g = self.geo
        self.specs, self.scratch_nbytes = [], 0
        store = store_epilogue(act, self.slope)
        # the loop clips and activates each output row as it stores it; an activation without
        # a compiled loop runs after it
        self.after = None if store is not None else self.act
        self.lo, self.hi, self.epi = store or clip_bounds({}) + (NO_STORE,)
        self.loop_bias = np.ascontiguousarray(loop_bias(self.bias, g.c))
        self.loop_args = (g.strides[0], g.strides[1], g.dilations[0], g.dilations[1],
                          g.pads[0], g.pads[1])
        # the line loop clips only: an activation the general loop's store runs goes in place
        # after it, where it has such a loop of its own (a PRELU's per-channel slope has not)
        self.line_after = compiled_in_place(act, np.float32) if self.epi[0] != 0 else None
        self.line = self._line() if op_loops("_line_loops") is not None and \
            (self.epi[0] == 0 or self.line_after is not None) else None

    def _line(self):
        """(axis, stride, dilation, pad) of a conv along one axis only (the other input extent 1,
        the filter 1 along it, no padding there): _line_loops' path; else None."""
        g = self.geo
        if g.w == 1 and g.kw == 1 and g.ow == 1 and g.pads[1] == g.pads[3] == 0:
            return 1, g.strides[0], g.dilations[0], g.pads[0]
        if g.h == 1 and g.kh == 1 and g.oh == 1 and g.pads[0] == g.pads[2] == 0:
            return 2, g.strides[1], g.dilations[1], g.pads[1]
        return None

    def bind(self, inputs, outputs, scratch=None):
        g = self.geo
        x, out = inputs[0], outputs[0]
        if self.compiled and self.line is not None and x.flags.c_contiguous and out.flags.c_contiguous:
            tail = [partial(self.line_after, out.reshape(-1))] if self.line_after is not None else []
            return sequence([self._bind_line(x, out)] + tail + epilogue(compute_of(self.ctx), out, None, self.after))
        if self.compiled:
            args = (x, self.taps, self.loop_bias, self.lo, self.hi, self.epi, *self.loop_args, out)
            # work: each output reads kh * kw taps (a 7 x 7 x 512 map's 5 x 5 conv is 627 k
            # multiply-adds, not the 50 k elements its tensors hold: it ran serial at two threads)
            run = compute_of(self.ctx).loop("depthwise", args, g.n * g.oh, x.size + out.size * g.kh * g.kw)
            return sequence([run] + epilogue(compute_of(self.ctx), out, None, self.after))
        bufs = carve(scratch, self.specs)
        steps, xp = [], x
        if any(g.pads):
            xp = bufs[-1]
            steps += pad_steps(xp, x, g.pads, compute=compute_of(self.ctx))
        tmp = None if self.use_einsum else bufs[0]
        steps += self._taps(xp, out, tmp, 0, g.oh)
        return sequence(steps + epilogue(compute_of(self.ctx), out, self.bias, self.act))

    def _bind_line(self, x, out):
        g = self.geo
        axis, stride, dil, pad = self.line
        k = g.kh if axis == 1 else g.kw
        line, lout = x.reshape(g.n, -1, g.c), out.reshape(g.n, -1, g.c)   # contiguous: views
        args = (line, self.taps.reshape(k, g.c), self.loop_bias, self.lo, self.hi, stride, dil, pad, lout)
        # 16 channels or more: each row's channels in registers (rows' last axes contiguous here)
        name = "depthwise_taps" if g.c >= 16 else "depthwise_line"
        return compute_of(self.ctx).loop(name, args, lout.shape[0] * lout.shape[1],
                                         x.size + out.size * k, lib=op_loops("_line_loops"))

    def _taps(self, xp, out, tmp, r0: int, r1: int) -> list:
        """Steps computing output rows r0:r1 (before bias and activation)."""
        g = self.geo
        out = out[:, r0:r1]
        if self.use_einsum:
            s0, s1, s2, s3 = xp.strides
            base = xp[:, r0 * g.strides[0]:]
            view = as_strided(base, (g.n, r1 - r0, g.ow, g.kh, g.kw, g.c),
                              (s0, s1 * g.strides[0], s2 * g.strides[1], s1 * g.dilations[0],
                               s2 * g.dilations[1], s3), writeable=False)
            return [partial(np.einsum, "nhwijc,ijc->nhwc", view, self.taps, out=out)]
        tmp = tmp[:, r0:r1]
        wins = [(self._window(xp, i, j, r0, r1), self.taps[i, j])
                for i in range(g.kh) for j in range(g.kw)]
        steps = [partial(np.multiply, wins[0][0], wins[0][1], out=out)]
        for win, tap in wins[1:]:
            steps += [partial(np.multiply, win, tap, out=tmp), partial(np.add, out, tmp, out=out)]
        return steps

    def _window(self, xp, i, j, r0, r1):
        g = self.geo
        top, c0 = r0 * g.strides[0] + i * g.dilations[0], j * g.dilations[1]
        return xp[:, top:top + g.strides[0] * (r1 - r0 - 1) + 1:g.strides[0],
                  c0:c0 + g.strides[1] * (g.ow - 1) + 1:g.strides[1], :]
