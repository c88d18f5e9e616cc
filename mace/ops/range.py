"""Range: [start, start + delta, ...) up to (not including) limit, like ONNX Range.

Inputs: start, limit, delta (scalars). The output length depends on their
values, so they must be constant; the op then folds away during conversion.
"""
import math

import numpy as np

from mace.ops.registry import Layout, OpSpec, SimpleKernel, kernel, register_op


def range_length(start, limit, delta) -> int:
    if delta == 0:
        raise ValueError("delta must not be 0")
    return max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)


@register_op("Range", layout=Layout.ANY)
class Range(OpSpec):
    @staticmethod
    def infer(ctx):
        if any(v is None for v in ctx.values):
            raise ValueError(f"Range '{ctx.op.name}': start, limit and delta must be constant")
        start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in ctx.values)
        try:
            n = range_length(start, limit, delta)
        except ValueError as e:
            raise ValueError(f"Range '{ctx.op.name}': {e}") from None
        return [((n,), ctx.dtypes[0])]


@kernel("Range", "cpu")
class RangeCpu(SimpleKernel):
    def compute(self, start, limit, delta):
        n = self.ctx.output_shapes[0][0]
        # start + i * delta, as ONNX defines it (np.arange drifts for float steps).
        dtype = self.ctx.output_dtypes[0]
        return np.asarray(start, dtype).reshape(()) + np.arange(n, dtype=dtype) * \
            np.asarray(delta, dtype).reshape(())
