"""Range: [start, start + delta, ...) up to (not including) limit, like ONNX Range.

Inputs: start, limit, delta (scalars). Constant, they fold away during conversion. A limit
known only at run time (TensorFlow's Object Detection API: `range(min(100, rows NMS kept))`)
needs arg `bound`, the most values it can give (found at convert from the upper bounds of the
scalars it is computed from: mace/transform/value_bounds.py): output 0 is planned at that
bound and output 1, shape (1,), holds how many there are (`OpSpec.ragged`, mace/ops/_ragged.py).
"""
import math

import numpy as np

from mace.ops._ragged import write_ragged
from mace.ops.registry import Layout, OpSpec, SimpleKernel, kernel, register_op


def range_length(start, limit, delta) -> int:
    if delta == 0:
        raise ValueError("delta must not be 0")
    return max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)


@register_op("Range", layout=Layout.ANY)
class Range(OpSpec):
    attrs = {"bound": None}

    @staticmethod
    def infer(ctx):
        if any(v is None for v in ctx.values):
            bound = ctx.arg("bound")
            if bound is None:
                raise ValueError(f"Range '{ctx.op.name}': start, limit and delta must be constant, or an "
                                 f"upper bound of its length known (arg bound)")
            return [((int(bound),), ctx.dtypes[0]), ((1,), np.int64)]
        start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in ctx.values)
        try:
            n = range_length(start, limit, delta)
        except ValueError as e:
            raise ValueError(f"Range '{ctx.op.name}': {e}") from None
        return [((n,), ctx.dtypes[0])]

    @staticmethod
    def ragged(op) -> dict:
        return {0: (0, 1)} if len(op.output) == 2 else {}


@kernel("Range", "cpu")
class RangeCpu(SimpleKernel):
    def compute(self, start, limit, delta):
        n = self.ctx.output_shapes[0][0]
        # start + i * delta, as ONNX defines it (np.arange drifts for float steps).
        dtype = self.ctx.output_dtypes[0]
        return np.asarray(start, dtype).reshape(()) + np.arange(n, dtype=dtype) * \
            np.asarray(delta, dtype).reshape(())

    def run(self, inputs, outputs):
        if len(outputs) == 1:
            return super().run(inputs, outputs)
        start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in inputs)
        n = range_length(start, limit, delta)
        if n > outputs[0].shape[0]:   # convert's bound is wrong: say so rather than cut silently
            raise ValueError(f"Range '{self.ctx.op.name}': {n} values from start {start}, limit {limit}, "
                             f"delta {delta}, more than the {outputs[0].shape[0]} planned")
        dtype = outputs[0].dtype
        values = np.asarray(start, dtype) + np.arange(n, dtype=dtype) * np.asarray(delta, dtype)
        write_ragged(outputs[0], values, 0, outputs[1])
