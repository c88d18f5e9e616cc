"""LSTM, fast CPU kernel: every step's input projection as one packed GEMM, then the
recurrence as one compiled loop per direction (_rnn_loops.lstm).

The reference did one np.matmul per step and ~15 numpy calls on [batch, hidden] slices
(oww_hey_mycroft's LSTM: 96% of the model's run); the loop does a step's R product and gates
for a batch row in one pass, its states held in the Y_h / Y_c outputs. Float32 with constant
W, R, B and P (what the ONNX mapping gives); else the reference runs.
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


@kernel("LSTM", "cpu:fast")
class LstmFast(FastKernel):
    check = staticmethod(lambda ctx: float_recurrent(ctx, 3) or (
        "peepholes (input 6) are not constant" if ctx.consts[6] is None else None))

    def setup(self, ctx):
        w, r, b, p = (np.asarray(ctx.consts[i], np.float32) for i in (1, 2, 3, 6))
        self.reverse = directions(ctx.arg)
        self.layout = int(ctx.arg("layout", 0))
        self.clip = float(ctx.arg("clip", 0.0))
        n = r.shape[2]
        self.hidden = n
        x = ctx.input_shapes[0]
        self.seq, self.batch = (x[1], x[0]) if self.layout else (x[0], x[1])
        # both biases folded into the projection, added as the reference adds them (Wb + Rb first)
        bias = np.concatenate([b[d, :4 * n] + b[d, 4 * n:] for d in range(len(self.reverse))])
        self.proj = Projection(w, bias, self.seq * self.batch, compute_of(ctx))
        self.rt = [np.ascontiguousarray(r[d].T) for d in range(len(self.reverse))]
        self.p = [np.ascontiguousarray(p[d]) for d in range(len(self.reverse))]
        self.scratch_nbytes = scratch_size([self.proj.spec])

    @property
    def algorithm_name(self) -> str:
        return ("packed" if self.proj.panels is not None else "blas") + "+recurrence"

    def bind(self, inputs, outputs, scratch=None):
        x, h0, c0 = inputs[0], inputs[4], inputs[5]
        y, yh, yc = outputs
        (xw,) = carve(scratch, [self.proj.spec])
        steps = self.proj.steps(x, xw)
        lib = op_loops("_rnn_loops")
        for d, reverse in enumerate(self.reverse):
            xw_d, y_d, (h0_d, c0_d, yh_d, yc_d) = direction_views(
                xw, y, [h0, c0, yh, yc], d, 4 * self.hidden, self.layout, self.seq, self.batch)
            steps.append(partial(lib.lstm, xw_d, self.rt[d], self.p[d], h0_d, c0_d, reverse,
                                 self.clip, y_d, yh_d, yc_d))
        return sequence(steps)

