"""ScatterElements: a copy of `data` with single elements of `updates` written at `indices` along
arg `axis` (ONNX ScatterElements, and the older Scatter); indices and updates share one shape.

Arg `reduction`: none (later writes win, in index order), add, mul, max, min. Negative indices
count from the end. Layout ANY.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops._scatter import reduction, write
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("ScatterElements", layout=Layout.ANY)
class ScatterElements(OpSpec):
    attrs = {"axis": 0, "reduction": "none"}

    @staticmethod
    def infer(ctx):
        data, idx, upd = (tuple(s) for s in ctx.shapes)
        if idx != upd or len(idx) != len(data):
            raise ValueError(f"ScatterElements '{ctx.op.name}': indices {list(idx)} and updates "
                             f"{list(upd)} must share one shape of the data's rank {len(data)}")
        normalize_axis(ctx.arg("axis"), len(data))
        reduction(ctx)
        return [(data, ctx.dtypes[0])]


@kernel("ScatterElements", "cpu")
class ScatterElementsCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.red = reduction(ctx)

    def run(self, inputs, outputs):
        data, idx, upd = inputs[0], np.asarray(inputs[1], np.int64), inputs[2]
        dim = data.shape[self.axis]
        idx = np.where(idx < 0, idx + dim, idx)
        if idx.size and ((idx < 0).any() or (idx >= dim).any()):
            raise ValueError(f"ScatterElements '{self.ctx.op.name}': indices out of range")
        where = list(np.indices(idx.shape, sparse=True))
        where[self.axis] = idx
        out = outputs[0]
        np.copyto(out, data)
        write(out, tuple(np.broadcast_arrays(*where)), upd, self.red)
