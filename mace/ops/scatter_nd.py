"""ScatterND: a copy of `data` with `updates` written at the slices the last axis of `indices`
addresses (ONNX ScatterND).

Arg `reduction`: none (later writes win, in index order), add, mul, max, min. Negative indices
count from the end. Layout ANY.
"""
import numpy as np

from mace.ops._scatter import reduction, write
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("ScatterND", layout=Layout.ANY)
class ScatterND(OpSpec):
    attrs = {"reduction": "none"}

    @staticmethod
    def infer(ctx):
        data, idx, upd = (tuple(s) for s in ctx.shapes)
        m = idx[-1] if idx else 0
        if not idx or m > len(data) or upd != idx[:-1] + data[m:]:
            raise ValueError(f"ScatterND '{ctx.op.name}': indices {list(idx)} and updates {list(upd)} "
                             f"do not fit data {list(data)}")
        reduction(ctx)
        return [(data, ctx.dtypes[0])]


@kernel("ScatterND", "cpu")
class ScatterNDCpu(Kernel):
    def setup(self, ctx):
        self.red = reduction(ctx)

    def run(self, inputs, outputs):
        data, idx, upd = inputs[0], np.asarray(inputs[1], np.int64), inputs[2]
        m = idx.shape[-1]
        dims = np.asarray(data.shape[:m])
        idx = np.where(idx < 0, idx + dims, idx).reshape(-1, m)
        if idx.size and ((idx < 0).any() or (idx >= dims).any()):
            raise ValueError(f"ScatterND '{self.ctx.op.name}': indices out of range")
        out = outputs[0]
        np.copyto(out, data)
        write(out, tuple(idx.T), upd.reshape((-1,) + data.shape[m:]), self.red)
