"""MatMul, fast CPU kernel: float32 products of rank 2 or more as GEMMs on the compute pool.

The reference's np.matmul is one call into OpenBLAS, run with OpenBLAS's own threads
switched on around its step (Kernel.uses_blas, mace/ops/fast/_pool.py); on the pool its
products split with the other kernels' work instead: a 2-D product split by rows or
columns, a batch of them side by side (either operand may be shared across the batch). Batch axes of higher ranks fold into one (an
attention's [1, heads, seq, d] products are one stack of heads*seq GEMMs): the reference on
those had OpenBLAS's threads spinning on 16-row GEMMs (MiniLM: ~20x slower than onnxruntime
on a busy 2-core machine, when a reference MatMul still took the pool from every kernel). A
constant operand is transposed once at load; a transposed input `b` is read in place
(cblas's transposed B); a transposed input `a`, 1-D operands and broadcasts other than a
whole operand shared are left to the reference. Off the pool it is np.matmul.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import not_float32
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel


def _stacked(shape, out) -> bool:
    """An operand whose batch axes are the output's, or hold one matrix (shared by the stack)."""
    batch = tuple(shape[:-2])
    return int(np.prod(batch)) == 1 or (1,) * (len(out) - len(shape)) + batch == tuple(out[:-2])


def plain_float(ctx) -> str | None:
    (sa, sb), out = ctx.input_shapes[:2], ctx.output_shapes[0]
    ranks_ok = len(sa) >= 2 and len(sb) >= 2 and len(out) == max(len(sa), len(sb))
    if not ranks_ok:
        return f"operands of rank {len(sa)} and {len(sb)} (2 or more, the output's rank)"
    if not (_stacked(sa, out) and _stacked(sb, out)):
        return "batch dimensions broadcast"
    if ctx.arg("transpose_a", 0) and ctx.consts[0] is None:
        return "transpose_a of a computed operand"
    return not_float32(ctx, (0, 1))


@kernel("MatMul", "cpu:fast")
class MatMulFast(FastKernel):
    check = staticmethod(plain_float)

    def setup(self, ctx):
        ta, self.tb = bool(ctx.arg("transpose_a", 0)), bool(ctx.arg("transpose_b", 0))
        # constants: transposed and made contiguous once (as the reference does)
        self.consts = [None if c is None else
                       np.ascontiguousarray(np.swapaxes(np.asarray(c, np.float32), -1, -2) if t else c,
                                            np.float32)
                       for c, t in zip(ctx.consts[:2], (ta, self.tb))]

    def bind(self, inputs, outputs, scratch=None):
        a = self.consts[0] if self.consts[0] is not None else inputs[0]
        b = self.consts[1] if self.consts[1] is not None else inputs[1]
        trans_b = self.tb and self.consts[1] is None   # b as given is [.., n, k]
        folded = _fold(a), _fold(b), _fold(outputs[0])   # batch axes as one (views)
        if any(x is None for x in folded):   # a strided buffer: numpy's broadcasting
            return partial(np.matmul, a, np.swapaxes(b, -1, -2) if trans_b else b, out=outputs[0])
        return compute_of(self.ctx).matmul(*folded, trans_b)


def _fold(x):
    """x as one matrix (a batch of one) or a 3-D stack, a view; None where that would copy."""
    n = int(np.prod(x.shape[:-2]))
    if x.ndim == 2 or (x.ndim == 3 and n > 1):   # the pool's stacks take any strides
        return x
    if n == 1:
        return x[(0,) * (x.ndim - 2)]
    return x.reshape(n, *x.shape[-2:]) if x.flags.c_contiguous else None
