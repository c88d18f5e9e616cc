"""Cast: convert the input to arg `to`, a numpy dtype name ("float32", "int64", "bool", ...).

Float to integer truncates toward zero and any non-zero becomes True, as in
C (and ONNX). Element-wise, so it follows its input's layout.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Layout, OpSpec, SimpleKernel, kernel, register_op


@register_op("Cast", layout=Layout.ELEMENTWISE)
class Cast(OpSpec):
    attrs = {"to": REQUIRED}

    @staticmethod
    def infer(ctx):
        try:
            dtype = np.dtype(ctx.arg("to"))
        except TypeError:
            raise ValueError(f"Cast '{ctx.op.name}': unknown dtype '{ctx.arg('to')}'") from None
        return [(tuple(ctx.shapes[0]), dtype)]


@kernel("Cast", "cpu")
class CastCpu(SimpleKernel):
    def compute(self, x):
        return x.astype(self.ctx.output_dtypes[0])
