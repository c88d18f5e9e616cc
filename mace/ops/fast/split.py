"""Split, fast CPU kernel: each output's piece of the input taken once, at load, as a view;
each run is one copy a piece, a small one the compiled row copy (_base.copy_step; the reference
calls np.split, building the views again, on every run). Any dtype: a copy is the same bytes.
"""
from __future__ import annotations

import numpy as np

from mace.ops._common import normalize_axis, sequence
from mace.ops.fast._base import FastKernel, copy_step
from mace.ops.registry import kernel


@kernel("Split", "cpu:fast")
class SplitFast(FastKernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis", 0), len(ctx.input_shapes[0]))
        self.cuts = np.cumsum(ctx.arg("split"))[:-1]

    def bind(self, inputs, outputs, scratch=None):
        pieces = np.split(inputs[0], self.cuts, axis=self.axis)
        return sequence([copy_step(out, piece) for out, piece in zip(outputs, pieces)])
