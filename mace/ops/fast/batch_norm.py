"""BatchNorm (y = x * scale + offset per channel, then a clip), fast CPU kernel: one compiled pass.

DenseNet's pre-activation BN + ReLU sits on a concat output, so it cannot be
folded into a conv; the reference's multiply, add and clip are three passes
over the tensor (DenseNet-121 ran 62 of them for 4.3 of its 26 ms). The
compiled loop (_loops.scale_shift_clip) reads x once and writes y once.
Channels must be the last axis (NHWC, the CPU layout). An activation that is not a clip but has
a compiled loop (openWakeWord's BN + LEAKYRELU) runs it in place after the pass (as the
reference's apply_activation after its affine). Other cases, and the no-numba case, stay with
the reference kernel.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import activation_args, sequence
from mace.ops.fast._act_codes import CODES as ACT_CODES
from mace.ops.fast._base import F32, FastKernel, activation_fn, clip_bounds
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import act_loops, loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel


def channels_last_float(ctx) -> str | None:
    shape = ctx.input_shapes[0]
    channels_last = ctx.arg("data_format", "NHWC") != "NCHW" or len(shape) < 2
    if loops() is None:
        return NO_LOOPS
    if not channels_last:
        return "channels first (NCHW)"
    if len(shape) < 1 or shape[-1] <= 0:
        return f"input shape {list(shape)} has no channels"
    if ctx.consts[1] is None or ctx.consts[2] is None:
        return "scale or offset is not constant"
    if not np.size(ctx.consts[1]) == shape[-1] == np.size(ctx.consts[2]):
        return "scale and offset are not one value per channel"
    reason = not_float32(ctx)
    if reason:
        return reason
    if clip_bounds(activation_args(ctx)) is not None or (act_loops() is not None
                                                         and ctx.arg("activation", "") in ACT_CODES):
        return None
    return f"fused activation {ctx.arg('activation', '')} has no compiled loop"


@kernel("BatchNorm", "cpu:fast")
class BatchNormFast(FastKernel):
    check = staticmethod(channels_last_float)

    def setup(self, ctx):
        self.scale = np.asarray(ctx.consts[1], np.float32).reshape(-1)
        self.offset = np.asarray(ctx.consts[2], np.float32).reshape(-1)
        self.bounds, self.after = clip_bounds(activation_args(ctx)), None
        if self.bounds is None:   # LEAKYRELU, SIGMOID, ...: their loop in place after the affine
            self.bounds, self.after = (F32.type(-np.inf), F32.type(np.inf)), activation_fn(activation_args(ctx))

    def bind(self, inputs, outputs, scratch=None):
        c = self.scale.shape[0]
        # arena tensors are contiguous: the reshapes are views the loop writes through
        x, out = inputs[0].reshape(-1, c), outputs[0].reshape(-1, c)
        step = compute_of(self.ctx).loop("scale_shift_clip", (x, self.scale, self.offset, *self.bounds, out), x.shape[0],
                    2 * x.size)
        return step if self.after is None else sequence([step, partial(self.after, outputs[0])])
