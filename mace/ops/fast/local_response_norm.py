"""LocalResponseNorm, fast CPU kernel: the channel-window sum of squares as one GEMM.

sum over the window of x^2 is x^2 @ Band, Band[c', c] = alpha/size where c' is in
c's window: one BLAS call instead of the reference's float64 cumsum and
gather. The power uses sqrt for the usual beta = 0.75 (t^0.75 = sqrt(t) *
sqrt(sqrt(t))) and 0.5, np.power otherwise.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel, carve, scratch_size
from mace.ops.fast._checks import not_float32
from mace.ops.registry import kernel


def float_nhwc(ctx) -> str | None:
    if ctx.arg("data_format", "NHWC") != "NHWC":
        return f"data_format {ctx.arg('data_format', 'NHWC')} (NHWC only)"
    return not_float32(ctx)


def band(c: int, size: int, scale: float) -> np.ndarray:
    lo, hi = (size - 1) // 2, (size - 1) - (size - 1) // 2
    idx = np.arange(c)
    inside = (idx[:, None] >= idx[None, :] - lo) & (idx[:, None] <= idx[None, :] + hi)
    return (inside * scale).astype(np.float32)


@kernel("LocalResponseNorm", "cpu:fast")
class LocalResponseNormFast(FastKernel):
    check = staticmethod(float_nhwc)

    def setup(self, ctx):
        size = int(ctx.arg("size"))
        self.beta, self.bias = float(ctx.arg("beta", 0.75)), float(ctx.arg("bias", 1.0))
        c = ctx.input_shapes[0][-1]
        self.band = band(c, size, float(ctx.arg("alpha", 1e-4)) / size)
        m = int(np.prod(ctx.input_shapes[0][:-1]))
        self.specs = [((m, c), np.float32), ((m, c), np.float32)]
        self.scratch_nbytes = scratch_size(self.specs)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        sq, t = carve(scratch, self.specs)
        x2d, out2d = x.reshape(sq.shape), out.reshape(sq.shape)
        steps = [partial(np.multiply, x2d, x2d, out=sq), partial(np.matmul, sq, self.band, out=t),
                 partial(np.add, t, np.float32(self.bias), out=t)]
        if self.beta == 0.75:
            steps += [partial(np.sqrt, t, out=t), partial(np.sqrt, t, out=sq),
                      partial(np.multiply, t, sq, out=t)]
        elif self.beta == 0.5:
            steps.append(partial(np.sqrt, t, out=t))
        elif self.beta != 1.0:
            steps.append(partial(np.power, t, np.float32(self.beta), out=t))
        steps.append(partial(np.divide, x2d, t, out=out2d))
        return sequence(steps)
