"""FullyConnected, fast CPU kernel: GEMM into the output, then bias + clip in one pass.

The reference adds the bias and runs apply_activation as separate numpy calls;
with numba the epilogue is one compiled pass (conv2d.epilogue), and a small
weight (up to SMALL_WEIGHT elements) skips BLAS too: one compiled loop
(_loops.dense_rows) does the whole op (the digits example's 256 -> 10 head:
2.3 us in the reference, 1.4 us GEMM + fused epilogue, ~0.5 us as one loop), and so
does one input row on the compute pool, its weight rows split across the threads:
that streams the weight faster than OpenBLAS's GEMV (VGG-19's 25088 -> 4096 layer,
411 MB: 10.8 -> 9.5 ms).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import activation_args, sequence
from mace.ops.fast._base import (FastKernel, activation_fn, clip_bounds, compiled_in_place, loop_bias,
                                 store_epilogue)
from mace.ops.fast._checks import not_float32
from mace.ops.fast._conv_gemm import ConvGeometry, Panels, packed_width
from mace.ops.fast._jit import loops
from mace.ops.fast.compute import compute_of
from mace.ops.fast.conv2d import epilogue
from mace.ops.registry import kernel

SMALL_WEIGHT = 1 << 14   # BLAS's call overhead still dominates a GEMV this size
PACKED_MIN_ROWS = 2      # one row is a GEMV: dense_rows on the pool streams the weight faster


def fc_check(ctx) -> str | None:
    w = ctx.consts[1]
    if w is None:
        return "weight is not constant"
    if w.ndim != 2:
        return f"{w.ndim}-D weight (2-D only)"
    return not_float32(ctx) or (
        "bias is not constant" if len(ctx.consts) >= 3 and ctx.consts[2] is None else None)


@kernel("FullyConnected", "cpu:fast")
class FullyConnectedFast(FastKernel):
    check = staticmethod(fc_check)

    def setup(self, ctx):
        self.wt = np.asarray(ctx.consts[1], np.float32).T   # a view, as in the reference
        self.bias = None if len(ctx.consts) < 3 else np.asarray(ctx.consts[2], np.float32).reshape(-1)
        act = activation_args(ctx)
        self.act, self.bounds = activation_fn(act), clip_bounds(act)
        rows = int(np.prod(ctx.input_shapes[0][:-1]))
        # the whole op as one compiled loop: a small weight (BLAS's call overhead
        # dominates), or one input row on the compute pool, split by weight rows. With one row
        # (a GEMV: no packed GEMM) a fused activation that is not a clip (a wake-word head's
        # 128 -> 1 SIGMOID) then runs the Activation's compiled loop in place: ~1 us against ~3
        # for GEMV + numpy epilogue; several rows keep it in the packed GEMM's store step.
        self.tail = None if self.bounds is not None or rows >= PACKED_MIN_ROWS \
            else compiled_in_place(act, np.float32)
        self.small = ((self.bounds is not None or self.tail is not None) and loops() is not None
                      and (self.wt.size <= SMALL_WEIGHT or (rows == 1 and compute_of(ctx).active())))
        if self.small:
            if self.bounds is None:
                self.bounds = clip_bounds({})   # the loop's clip: none
            self.w = np.ascontiguousarray(self.wt.T)   # the (O, K) weight itself, no copy
            self.loop_bias = loop_bias(self.bias, self.w.shape[0])
        # several rows (a transformer's tokens, a batch): our packed GEMM with the weight packed
        # once here, bias and activation fused; OpenBLAS's sgemm re-packed the weight on every call
        # (MiniLM's FCs: 74% of its run). Where GEMMs belong to OpenBLAS's threads, width is 0.
        store = store_epilogue(act)
        width = 0 if self.small or rows < PACKED_MIN_ROWS or store is None else packed_width(
            ConvGeometry(1, rows, 1, self.wt.shape[0], 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), rows, 1,
                         self.wt.shape[1], 1), store[:2], compute_of(ctx))
        self.packed = Panels(np.ascontiguousarray(self.wt), self.bias, store[:2], width, store[2], compute_of(ctx)) \
            if width else None

    @property
    def algorithm_name(self) -> str:
        """What the profiler shows (Node.kernel_name): one compiled loop, our packed GEMM, or BLAS."""
        return "rows" if self.small else "packed" if self.packed is not None else "blas"

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        x2d, out2d = x.reshape(-1, x.shape[-1]), out.reshape(-1, out.shape[-1])
        compute = compute_of(self.ctx)
        if self.small:
            rows = compute.loop("dense_rows", (x2d, self.w, self.loop_bias, *self.bounds, out2d),
                        self.w.shape[0], self.w.size)
            return rows if self.tail is None else sequence([rows, partial(self.tail, out2d)])
        if self.packed is not None and x2d.flags.c_contiguous:
            return self.packed.step(x2d, out2d)
        # x @ W^T: on the pool W's rows are split (one input row: GEMVs)
        gemm = compute.matmul(x2d, self.wt.T, out2d, trans_b=True)
        return sequence([gemm] + epilogue(compute, out2d, self.bias, self.act, self.bounds))
