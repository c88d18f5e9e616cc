"""GRU, fast CPU kernel: every step's input projection as one packed GEMM, then the
recurrence as one compiled loop per direction (_rnn_loops.gru), both linear_before_reset forms.

The reference did three np.matmuls per step and a dozen numpy calls on [batch, hidden]
slices. Float32 with constant W, R and B (what the ONNX mapping gives); else the reference runs.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel, carve, scratch_size
from mace.ops.fast._jit import op_loops
from mace.ops.fast._recurrent import Projection, direction_views, float_recurrent
from mace.ops.fast.compute import compute_of
from mace.ops.lstm import directions
from mace.ops.registry import kernel


@kernel("GRU", "cpu:fast")
class GruFast(FastKernel):
    check = staticmethod(lambda ctx: float_recurrent(ctx, 3))

    def setup(self, ctx):
        w, r, b = (np.asarray(ctx.consts[i], np.float32) for i in (1, 2, 3))
        self.reverse = directions(ctx.arg)
        self.layout = int(ctx.arg("layout", 0))
        self.clip = float(ctx.arg("clip", 0.0))
        self.linear_before_reset = bool(ctx.arg("linear_before_reset", 0))
        n = r.shape[2]
        self.hidden = n
        x = ctx.input_shapes[0]
        self.seq, self.batch = (x[1], x[0]) if self.layout else (x[0], x[1])
        dirs = len(self.reverse)
        self.proj = Projection(w, np.concatenate([b[d, :3 * n] for d in range(dirs)]), self.seq * self.batch,
                               compute_of(ctx))
        self.rt = [np.ascontiguousarray(r[d].T) for d in range(dirs)]
        self.rb = [np.ascontiguousarray(b[d, 3 * n:]) for d in range(dirs)]
        self.scratch_nbytes = scratch_size([self.proj.spec])

    @property
    def algorithm_name(self) -> str:
        return ("packed" if self.proj.panels is not None else "blas") + "+recurrence"

    def bind(self, inputs, outputs, scratch=None):
        x, h0 = inputs[0], inputs[4]
        y, yh = outputs
        (xw,) = carve(scratch, [self.proj.spec])
        steps = self.proj.steps(x, xw)
        lib = op_loops("_rnn_loops")
        for d, reverse in enumerate(self.reverse):
            xw_d, y_d, (h0_d, yh_d) = direction_views(xw, y, [h0, yh], d, 3 * self.hidden, self.layout,
                                                      self.seq, self.batch)
            steps.append(partial(lib.gru, xw_d, self.rt[d], self.rb[d], h0_d, reverse, self.clip,
                                 self.linear_before_reset, y_d, yh_d))
        return sequence(steps)
