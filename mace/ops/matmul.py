"""MatMul: y = op(a) @ op(b) with numpy's batched broadcasting rules.

Inputs: a, b (either may be constant). Args transpose_a, transpose_b swap the
last two axes of an operand of rank >= 2 first. A 1-D operand is a vector:
a (K) acts as (1, K) and b (K) as (K, 1), and that axis is dropped from the
result. Batch axes (all but the last two) broadcast. Layout ANY: the matrix
axes are the framework's last two. A constant right-hand side with a 2-D
matrix usually becomes FullyConnected in the frontend instead.
"""
import numpy as np

from mace.ops._common import broadcast_shape
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op


def _swap_last(shape):
    return tuple(shape[:-2]) + (shape[-1], shape[-2])


def matmul_shape(a, b, transpose_a=False, transpose_b=False, name="?"):
    """Output shape of a MatMul of shapes `a` and `b` (raises on a mismatch)."""
    a, b = tuple(a), tuple(b)
    if not a or not b:
        raise ValueError(f"MatMul '{name}': operands must have rank >= 1, got {a} and {b}")
    if transpose_a and len(a) >= 2:
        a = _swap_last(a)
    if transpose_b and len(b) >= 2:
        b = _swap_last(b)
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"MatMul '{name}': inner dims differ: {a} @ {b}")
    batch = broadcast_shape(a2[:-2], b2[:-2])
    out = batch + (a2[-2], b2[-1])
    # Drop the axes a 1-D operand added.
    if len(b) == 1:
        out = out[:-1]
    if len(a) == 1:
        out = out[:-2] + out[-1:] if len(b) > 1 else out[:-1]
    return out


@register_op("MatMul", layout=Layout.ANY)
class MatMul(OpSpec):
    attrs = {**FUSED_ACTIVATION, "transpose_a": 0, "transpose_b": 0}

    @staticmethod
    def infer(ctx):
        out = matmul_shape(ctx.shapes[0], ctx.shapes[1], ctx.arg("transpose_a"),
                           ctx.arg("transpose_b"), ctx.op.name)
        return [(out, np.result_type(*ctx.dtypes))]


def _operand(x, transpose):
    return np.swapaxes(x, -1, -2) if transpose and x.ndim >= 2 else x


@kernel("MatMul", "cpu")
class MatMulCpu(Kernel):
    uses_blas = True

    def setup(self, ctx):
        self.ta, self.tb = bool(ctx.arg("transpose_a")), bool(ctx.arg("transpose_b"))
        dtype = ctx.output_dtypes[0]
        # Constant operands are transposed and made contiguous once, here.
        self.consts = [None if c is None else
                       np.ascontiguousarray(_operand(np.asarray(c, dtype), t))
                       for c, t in zip(ctx.consts, (self.ta, self.tb))]
        # np.matmul writes straight into the output when dtypes already agree.
        self.direct = all(d == dtype for d in ctx.input_dtypes)

    def run(self, inputs, outputs):
        a = self.consts[0] if self.consts[0] is not None else _operand(inputs[0], self.ta)
        b = self.consts[1] if self.consts[1] is not None else _operand(inputs[1], self.tb)
        out = outputs[0]
        if self.direct and out.ndim:
            np.matmul(a, b, out=out)
        else:
            np.copyto(out, np.matmul(a, b), casting="unsafe")
