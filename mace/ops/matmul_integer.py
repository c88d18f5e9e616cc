"""MatMulInteger: (A - a_zero_point) @ (B - b_zero_point) on 8-bit integers, an int32 result
(ONNX MatMulInteger; onnxruntime's quantize_dynamic makes transformer MatMuls into these).

Inputs: A, B (uint8 or int8; numpy matmul broadcasting), optional zero points: A's a scalar or
one per row (M), B's a scalar or one per column (N); args has_a_zero / has_b_zero say which are
given. Exact: the products are summed in float64 (BLAS), which holds every 8-bit dot product of
up to 2^37 terms exactly, then cast to int32; a constant B whose columns' sums of |B - b_zero|
times 255 stay below 2^24 is summed in float32, exact too (every partial sum is an integer
float32 holds). Layout ANY.

With arg `scaled` (fuse_matmul_integer_to_float: the Cast, scale product and bias after it,
quantize_dynamic's own sequence) two more inputs follow, a float32 scale (one, or one per column)
and, with `has_bias`, a float32 bias per column, and the output is float32: float32(int32 result)
* scale + bias, each step rounded in float32 as those ops were.
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("MatMulInteger", layout=Layout.ANY)
class MatMulInteger(OpSpec):
    attrs = {"has_a_zero": 0, "has_b_zero": 0, "scaled": 0, "has_bias": 0}

    @staticmethod
    def infer(ctx):
        a, b = tuple(ctx.shapes[0]), tuple(ctx.shapes[1])
        a2, b2 = (a if len(a) > 1 else (1,) + a), (b if len(b) > 1 else b + (1,))
        if a2[-1] != b2[-2]:
            raise ValueError(f"MatMulInteger '{ctx.op.name}': {list(a)} @ {list(b)} do not fit")
        out = np.broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
        if len(a) == 1:
            out = out[:-2] + out[-1:]
        if len(b) == 1:
            out = out[:-1]
        return [(tuple(out), np.float32 if ctx.arg("scaled") else np.int32)]


def _centred(x, zero, per_row):
    x = np.asarray(x, np.float64)
    if zero is None:
        return x
    zero = np.asarray(zero, np.float64)
    if zero.size > 1:  # per row of A ([M] -> [M, 1]) or per column of B ([N] -> [1, N])
        zero = zero.reshape(-1, 1) if per_row else zero.reshape(1, -1)
    return x - zero


def constant_b(ctx) -> tuple:
    """((has_a_zero, has_b_zero), B - b_zero as float64), the second None where B or its zero
    point is not a constant."""
    has = (bool(ctx.arg("has_a_zero")), bool(ctx.arg("has_b_zero")))
    consts = list(ctx.consts) + [None] * 4
    b, b_zero = consts[1], (consts[2 + has[0]] if has[1] else None)
    if b is None or (has[1] and b_zero is None):
        return has, None
    return has, _centred(b, b_zero, False)


def scale_inputs(has: tuple, inputs) -> tuple:
    """(scale, bias) of a `scaled` MatMulInteger's inputs (bias None without has_bias), or
    (None, None) for a plain one; `has` is scale_args'."""
    if not has[2]:
        return None, None
    at = 2 + has[0] + has[1]
    return inputs[at], (inputs[at + 1] if has[3] else None)


def scale_args(ctx) -> tuple:
    """(has_a_zero, has_b_zero, scaled, has_bias) as booleans."""
    return tuple(bool(ctx.arg(k)) for k in ("has_a_zero", "has_b_zero", "scaled", "has_bias"))


def apply_scale(sums, scale, bias, out) -> None:
    """out = float32(sums) * scale (+ bias): the Cast, Mul and Add a `scaled` MatMulInteger
    stands for, each rounded in float32 (scale and bias broadcast along the last axis)."""
    np.multiply(sums.astype(np.float32, copy=False), np.asarray(scale, np.float32), out=out)
    if bias is not None:
        np.add(out, np.asarray(bias, np.float32), out=out)


def float32_exact(b_centred) -> bool:
    """Whether float32 sums of (A - a_zero) @ b_centred are exact for any 8-bit A: no column's sum
    of |A - a_zero| * |B - b_zero| can pass 2^24 (|A - a_zero| <= 255), so every partial sum is an
    integer float32 holds (quantize_dynamic's int8 weights are mostly small)."""
    return 255 * float(np.abs(b_centred).sum(axis=-2).max(initial=0)) < 2 ** 24


@kernel("MatMulInteger", "cpu")
class MatMulIntegerCpu(Kernel):
    # not uses_blas: quantize_dynamic's MatMuls are small GEMMs (a transformer's [16, 384] x
    # [384, 1536]), where handing OpenBLAS its threads back for the step cost more than the step
    # (paraphrase-MiniLM-L3's 18: 55 ms a run with, 6 without, on a loaded 2-core machine)

    def setup(self, ctx):
        # a constant B (quantize_dynamic's weights) is centred and widened once, not every run
        self.has, self.b = constant_b(ctx)
        self.flags = scale_args(ctx)
        if self.b is not None and self.b.ndim >= 2 and float32_exact(self.b):
            self.b = self.b.astype(np.float32)   # still exact (float32_exact), at half the cost

    def run(self, inputs, outputs):
        rest = iter(inputs[2:])
        a_zero = next(rest) if self.has[0] else None
        b_zero = next(rest) if self.has[1] else None
        a = _centred(inputs[0], a_zero, True)
        b = self.b if self.b is not None else _centred(inputs[1], b_zero, False)
        a = a.astype(b.dtype, copy=False)
        if b.ndim == 2 and a.ndim > 2:   # stacked rows times one matrix: one 2-D BLAS call
            product = (a.reshape(-1, a.shape[-1]) @ b).reshape(a.shape[:-1] + b.shape[-1:])
        else:
            product = np.matmul(a, b)
        scale, bias = scale_inputs(self.flags, inputs)
        if scale is None:
            np.copyto(outputs[0], product.astype(np.int32))
        else:
            apply_scale(product.astype(np.int32), scale, bias, outputs[0])
