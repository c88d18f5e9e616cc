"""MatMulInteger with a constant B (onnxruntime's quantize_dynamic weights), fast CPU kernel.

uint8 A: our integer GEMM (mace/ops/fast/int8/_qgemm.py), B packed once at load as int8, A's
rows read in place, the exact int32 sums stored by the tile (no output stage; A's run-time zero
point enters as a per-column correction set before each run). paraphrase-MiniLM-L3's 18: the
float path below took 1.16 ms a run, this 0.30 (a quarter of the bytes: the weights stay int8).
A `scaled` one (fuse_matmul_integer_to_float) then writes float32(sums) * scale + bias in one
compiled pass (_integer_loops.scale_sums).

Otherwise (an int8 A, no compiled int8 loops): the codes of A minus their run-time zero point as
float32 (one compiled pass), our packed float GEMM against B - b_zero packed once at load, and
the sums back to int32 (one compiled pass).

The reference re-centres and widens A with numpy on every call and multiplies in float64 where
float32 could round; paraphrase-MiniLM-L3's 18 MatMulIntegers were 3.1 of its 5 ms. Exact, as
onnxruntime's integer GEMM: taken only where 255 times each column's sum of |B - b_zero| is below
2^24, so no partial sum of any A can leave the integers float32 holds (the reference's own
float32 condition; every quantize_dynamic weight of the corpus is within 0.75 of it). Declines
(the reference runs): a B past that bound, a non-constant or non-2-D B, a zero point per row
of A.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import NO_STORE, FastKernel, carve, scratch_size
from mace.ops.fast._checks import NO_LOOPS
from mace.ops.fast._conv_gemm import ConvGeometry, Panels, packed_width
from mace.ops.fast._jit import op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.fast.int8._qgemm import MAX_K, SLACK, QPanels, pool_width
from mace.ops.fast.int8._qjit import qloops
from mace.ops.matmul_integer import MatMulIntegerCpu, constant_b, float32_exact, scale_args, scale_inputs
from mace.ops.registry import kernel

F32 = np.float32
OPEN = (F32(-np.inf), F32(np.inf))   # the packed GEMM's store: no clip


def check(ctx) -> str | None:
    # B's shape and constness from the constants themselves: B - b_zero (constant_b, a float64
    # copy of the whole weight) is made only where the float path needs it
    flags = scale_args(ctx)   # has_a_zero, has_b_zero, scaled, has_bias
    b = ctx.consts[1]
    if b is None or (flags[1] and (list(ctx.consts) + [None] * 4)[2 + flags[0]] is None):
        return "B or its zero point is not constant"
    if b.ndim != 2:
        return f"{b.ndim}-D B (2-D only)"
    if np.dtype(ctx.input_dtypes[0]).itemsize != 1:
        return f"A is {np.dtype(ctx.input_dtypes[0])}"
    scaling = ctx.input_dtypes[2 + flags[0] + flags[1]:] if flags[2] else []
    if any(np.dtype(t) != F32 for t in scaling):
        return "scale or bias is not float32"
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in ctx.input_shapes[2 + flags[0] + flags[1]:]]
    if flags[2] and (sizes[0] not in (1, b.shape[1]) or (flags[3] and sizes[1] != b.shape[1])):
        return "scale not one or one per column, or bias not one per column"
    if flags[0] and int(np.prod(ctx.input_shapes[2], dtype=np.int64)) != 1:
        return "A's zero point is per row"
    if _integer_gemm(ctx) is None and not float32_exact(constant_b(ctx)[1]):
        return "a float32 sum could round (255 x a column's sum of |B - b_zero| >= 2^24)"
    return NO_LOOPS if op_loops("_integer_loops") is None else None


def _integer_gemm(ctx):
    """The compiled int8 loops where the integer GEMM takes this MatMulInteger (a uint8 A, an
    8-bit B of at most MAX_K rows), else None."""
    b = ctx.consts[1]
    if np.dtype(ctx.input_dtypes[0]) != np.uint8 or b.dtype not in (np.int8, np.uint8) or b.shape[0] > MAX_K:
        return None
    return qloops()


@kernel("MatMulInteger", "cpu:fast")
class MatMulIntegerFast(FastKernel):
    check = staticmethod(check)

    def setup(self, ctx):
        self.flags = scale_args(ctx)
        self.has = self.flags[:2]   # as the reference's: its run is this kernel's fallback
        k, n = ctx.consts[1].shape
        rows = int(np.prod(ctx.input_shapes[0][:-1], dtype=np.int64)) if len(ctx.input_shapes[0]) > 1 else 1
        self.zero = np.zeros(1, ctx.input_dtypes[0])   # A's zero point when none is given
        self.rows, self.k, self.n = rows, k, n
        compute = compute_of(ctx)
        lib = _integer_gemm(ctx)
        self.q = None
        if lib is not None:
            w_zero = np.asarray(ctx.consts[2 + self.has[0]] if self.has[1] else 0).reshape(-1)
            self.q = QPanels(lib, np.ascontiguousarray(ctx.consts[1].T).reshape(n, 1, k),
                             w_zero if w_zero.size > 1 else w_zero[0], None, 0, slice(0, n),
                             pool_width(compute), compute)
            self.copy = k % lib.KB != 0   # the tile's last 4-byte read of a row needs slack after it
            # sums of the rows (uint8 B's window sums), the int32 products a scaled one scales, A's
            # rows with slack
            self.specs = [((rows,), np.int64), ((rows, n) if self.flags[2] else (0, n), np.int32)] + \
                ([((rows * k + SLACK,), np.uint8)] if self.copy else [])
            self.scratch_nbytes = scratch_size(self.specs)
            self.packed = self.b = None
            return
        self.b = b = constant_b(ctx)[1].astype(F32)   # B - b_zero, exact in float32 (check)
        width = packed_width(ConvGeometry(1, rows, 1, k, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), rows, 1, n, 1),
                             OPEN, compute)
        # our packed GEMM (B packed once); where GEMMs are left to OpenBLAS's threads, sgemm
        self.packed = Panels(b, None, OPEN, width, NO_STORE, compute) if width else None
        self.specs = [((rows, k), F32), ((rows, n), F32)]
        self.scratch_nbytes = scratch_size(self.specs)

    @property
    def algorithm_name(self) -> str:
        return "int8" if self.q is not None else "packed" if self.packed is not None else "blas"

    def bind(self, inputs, outputs, scratch=None):
        a, out = inputs[0], outputs[0]
        zero = inputs[2].reshape(1) if self.has[0] else self.zero
        scale, bias = scale_inputs(self.flags, inputs)
        if not all(t.flags.c_contiguous for t in (a, out) + tuple(t for t in (scale, bias) if t is not None)):
            # views (none in quantize_dynamic's graphs): the reference's numpy
            return partial(MatMulIntegerCpu.run, self, inputs, outputs)
        out2d = out.reshape(self.rows, self.n)
        if self.q is not None:
            return self._bind_integer(a, zero, out2d, scratch, scale, bias)
        centred, sums = carve(scratch, self.specs)
        lib = op_loops("_integer_loops")
        gemm = self.packed.step(centred, sums) if self.packed is not None else \
            partial(np.matmul, centred, self.b, out=sums)
        # the sums are integers below 2^24 (float32_exact): float32(int32(sum)) is the sum itself
        last = partial(lib.integral_to_int32, sums.reshape(-1), out2d.reshape(-1)) if scale is None else \
            _scale_step(lib, sums, scale, bias, out2d)
        return sequence([partial(lib.centre_codes, a.reshape(-1), zero, centred.reshape(-1)), gemm, last])

    def _bind_integer(self, a, zero, out2d, scratch, scale, bias):
        sums, acc, *rest = carve(scratch, self.specs)
        x = a.reshape(self.rows, self.k)
        steps = [_zero_step(self.q, zero)]
        if self.copy:   # rows of K bytes not a multiple of 4: into scratch with slack after them
            xs = rest[0][:x.size].reshape(x.shape)
            steps.append(partial(np.copyto, xs, x))
            x = xs
        # the tile stores the int32 sums: into the output, or into scratch for a scaled one
        # (each row a line of one pixel: the pool can split the rows)
        steps += self.q.conv_steps(x.reshape(self.rows, 1, self.k), 1, (1, 1), 1,
                                   out2d if scale is None else acc, sums)
        if scale is not None:
            steps.append(_scale_step(op_loops("_integer_loops"), acc, scale, bias, out2d))
        return sequence(steps)


NO_BIAS = np.zeros(0, F32)


def _scale_step(lib, sums, scale, bias, out2d):
    """The step out2d = float32(sums) * scale (+ bias) (a scaled MatMulInteger)."""
    return partial(lib.scale_sums, sums, scale.reshape(-1), NO_BIAS if bias is None else bias.reshape(-1), out2d)


def _set_zero(q, zero):
    q.set_x_zero(int(zero[0]))


def _zero_step(q, zero):
    """The step setting the int8 tile's correction for A's zero point `zero` (a one-value array,
    read at run time): the compiled loop writing it into the tile's epilogue table, else
    set_x_zero's numpy product."""
    lib = op_loops("_integer_loops")
    if lib is None:
        return partial(_set_zero, q, zero)
    return partial(lib.zero_correction, q.base, zero.reshape(-1), q.ep[q.lib.EP_CORR, :q.base.size])
