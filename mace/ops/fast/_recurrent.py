"""What the fast LSTM and GRU share: the input projection of every step and direction as one
GEMM, and the per-direction views of X's projection, the states and the outputs.

The projection xw = x @ [W_0; W_1]^T + bias is one product over all seq * batch rows and both
directions' gates (W packed once at load into our GEMM's panels, _conv_gemm.Panels, the bias in
its store step; np.matmul and an add where GEMMs belong to OpenBLAS's threads). The recurrence
then reads direction d's gates as a [seq, batch, gates] view of it, whatever the layout.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._conv_gemm import Panels, contiguous
from mace.ops.fast._jit import op_loops
from mace.ops.fast.compute import ComputeContext

NO_CLIP = (np.float32(-np.inf), np.float32(np.inf))
# A projection under this many multiply-adds stays on the calling thread: a wake-word LSTM's
# (16 x 96 x 256, 0.4M) split across the pool made its model a pool session, and the OpenMP
# threads' wake-up on a loaded 2-core VM cost more than the whole run (oww_hey_mycroft at 2
# threads: 1.0-4.3 ms a run pooled, ~0.3 ms on one thread).
SPLIT_MACS = 1 << 22


def float_recurrent(ctx, constants: int) -> str | None:
    """float32 X and outputs, W / R / B (/ P) constant (the mapping fills omitted ones), loops there."""
    reason = not_float32(ctx, outputs=range(len(ctx.output_dtypes)))
    if reason:
        return reason
    for i in range(1, 1 + constants):
        if ctx.consts[i] is None:
            return f"input {i} is not constant"
    return NO_LOOPS if op_loops("_rnn_loops") is None else None


class Projection:
    """xw [rows, dirs * gates] = x2d @ W^T + bias, W [dirs, gates, input] (one GEMM)."""

    def __init__(self, w: np.ndarray, bias: np.ndarray, rows: int, compute: ComputeContext):
        dirs, gates, k = w.shape
        wt = np.ascontiguousarray(np.asarray(w, np.float32).transpose(2, 0, 1).reshape(k, dirs * gates))
        self.bias = np.asarray(bias, np.float32).reshape(-1)
        self.compute = compute
        width = compute.gemm_width() if rows else 0
        if rows * k * dirs * gates < SPLIT_MACS:
            width = min(width, 1)
        self.panels = Panels(wt, self.bias, NO_CLIP, width, compute=compute) if width else None
        self.wt = None if width else wt
        self.spec = ((rows, dirs * gates), np.float32)

    def steps(self, x, xw) -> list:
        steps = []
        x2d = contiguous(x, steps).reshape(-1, x.shape[-1])   # arena tensors are: no copy
        if self.panels is not None:
            return steps + [self.panels.step(x2d, xw)]
        return steps + [self.compute.matmul(x2d, self.wt, xw), partial(np.add, xw, self.bias, out=xw)]


def seq_major(t: np.ndarray, layout: int) -> np.ndarray:
    """[seq, batch, ...] view of a layout-1 ([batch, seq, ...]) tensor; layout 0 as it is."""
    return t.swapaxes(0, 1) if layout else t


def direction_views(xw, y, states: list, d: int, gates: int, layout: int, seq: int, batch: int):
    """(xw [seq, batch, gates], y [seq, batch, n], [state [batch, n], ...]) of direction d:
    Y is [seq, dirs, batch, n] (layout 1: [batch, seq, dirs, n]), states [dirs, batch, n]
    (layout 1: [batch, dirs, n])."""
    width = xw.shape[-1]
    xw3 = seq_major(xw.reshape((batch, seq, width) if layout else (seq, batch, width)), layout)
    y_d = y[:, :, d].swapaxes(0, 1) if layout else y[:, d]
    return xw3[:, :, d * gates:(d + 1) * gates], y_d, [s[:, d] if layout else s[d] for s in states]
