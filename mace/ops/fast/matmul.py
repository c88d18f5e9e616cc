"""MatMul, fast CPU kernel: float32 products of rank 2 or 3 as GEMMs on the compute pool.

The reference's np.matmul is one call into OpenBLAS; on the pool (mace/ops/fast/_pool.py)
that call would get one thread, so a graph holding the reference MatMul keeps OpenBLAS's
threads for every kernel (Kernel.uses_blas). This kernel puts the products on the pool
instead: a 2-D product split by rows or columns, a batch of them side by side (either
operand may be shared across the batch). A constant operand is transposed once at load;
a transposed input `b` is read in place (cblas's transposed B); a transposed input `a`
and other ranks are left to the reference. Off the pool it is np.matmul.
"""
from __future__ import annotations

import numpy as np

from mace.ops import matmul as _reference  # noqa: F401 - registers the op type first
from mace.ops.fast._base import F32, FastKernel
from mace.ops.fast._pool import matmul
from mace.ops.registry import kernel


def plain_float(ctx) -> bool:
    (sa, sb), out = ctx.input_shapes[:2], ctx.output_shapes[0]
    ranks_ok = len(sa) in (2, 3) and len(sb) in (2, 3) and len(out) == max(len(sa), len(sb))
    batch_ok = len(sa) < 3 or len(sb) < 3 or sa[0] == sb[0]
    transposed_input_a = ctx.arg("transpose_a", 0) and ctx.consts[0] is None
    return (ranks_ok and batch_ok and not transposed_input_a
            and all(np.dtype(d) == F32 for d in list(ctx.input_dtypes[:2]) + [ctx.output_dtypes[0]]))


@kernel("MatMul", "cpu:fast")
class MatMulFast(FastKernel):
    accepts = staticmethod(plain_float)

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
        return matmul(a, b, outputs[0], trans_b)
