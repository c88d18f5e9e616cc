"""Gather, fast CPU kernel: np.take into the output with mode="clip" on indices already made
non-negative and checked (at load when they are constant, as the reference does). The
reference's np.take(out=...) runs with numpy's default mode="raise", under which numpy
buffers the whole result and copies it into `out` ("out is always buffered if mode='raise'"):
birdnet's STFT framing gathers 1 M floats a Gather. The same picks, the same bytes.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.fast._base import FastKernel
from mace.ops.gather import wrap_indices
from mace.ops.registry import kernel


@kernel("Gather", "cpu:fast")
class GatherFast(FastKernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis", 0), len(ctx.input_shapes[0]))
        self.dim = ctx.input_shapes[0][self.axis]
        idx = ctx.consts[1]
        self.indices = None if idx is None else wrap_indices(idx, self.dim, ctx.op.name)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if self.indices is not None:
            return partial(np.take, x, self.indices, axis=self.axis, out=out, mode="clip")
        index, name = inputs[1], self.ctx.op.name

        def run():   # runtime indices: checked and wrapped on every run, as the reference does
            np.take(x, wrap_indices(index, self.dim, name), axis=self.axis, out=out, mode="clip")
        return run
