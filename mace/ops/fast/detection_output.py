"""DetectionOutput (SSD), fast CPU kernel: the reference's decode, candidates and output rows,
with its greedy NMS as one compiled loop (_detection_loops.greedy_nms: the same float64 IoUs
and decisions, so the same output bytes). Without numba the reference runs."""
from __future__ import annotations

import numpy as np

from mace.ops import detection_output as _reference
from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS
from mace.ops.fast._jit import op_loops
from mace.ops.registry import kernel


def _lib():
    return op_loops("_detection_loops")


def compiled_nms(boxes, scores, threshold, nms_threshold, eta, top_k) -> list:
    order = _reference.candidates(scores, threshold, top_k).astype(np.int64)
    kept = np.empty(order.shape[0], np.int64)
    n = _lib().greedy_nms(np.ascontiguousarray(boxes, np.float64), order, float(nms_threshold),
                          float(eta), kept)
    return kept[:n].tolist()


@kernel("DetectionOutput", "cpu:fast")
class DetectionOutputFast(FastKernel):
    check = staticmethod(lambda ctx: NO_LOOPS if _lib() is None else None)

    def setup(self, ctx):
        self.a = _reference._args(ctx)
        self.rows = ctx.output_shapes[0][2]

    def bind(self, inputs, outputs, scratch=None):
        loc, conf, prior = inputs
        out = outputs[0]

        def run():
            n = loc.shape[0]
            result = _reference.detection_output(self.a, loc.reshape(n, -1), conf.reshape(n, -1), prior,
                                                 self.rows, compiled_nms)
            np.copyto(out, result.reshape(out.shape), casting="unsafe")
        return run
