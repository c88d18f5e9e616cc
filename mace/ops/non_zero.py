"""NonZero: the indices of the non-zero elements of its input, [rank, n] int64 in row-major order.

n depends on the data: output 0 is planned at [rank, size of the input] and output 1, shape (1,),
holds n (`OpSpec.ragged`, mace/ops/_ragged.py). An input whose own length depends on the data
(TensorFlow's Where of a test on NMS's rows) comes with that length as input 1 and its axis as
arg `ragged_axis` (mark_ragged): only the elements before it are looked at, since an element-wise
op may have made its padding non-zero.
"""
import numpy as np

from mace.ops._ragged import write_ragged
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("NonZero", layout=Layout.ANY)
class NonZero(OpSpec):
    attrs = {"ragged_axis": REQUIRED}

    @staticmethod
    def infer(ctx):
        shape = ctx.shapes[0]
        return [((max(len(shape), 1), int(np.prod(shape, dtype=np.int64))), np.int64), ((1,), np.int64)]

    @staticmethod
    def ragged(op) -> dict:
        return {0: (1, 1)}


@kernel("NonZero", "cpu")
class NonZeroCpu(Kernel):
    def run(self, inputs, outputs):
        x = inputs[0]
        if len(inputs) > 1:
            valid = int(np.asarray(inputs[1]).reshape(-1)[0])
            x = np.take(x, np.arange(valid), axis=int(self.ctx.arg("ragged_axis")))
        found = np.array(np.nonzero(x.reshape(1) if x.ndim == 0 else x), np.int64)
        write_ragged(outputs[0], found, 1, outputs[1])
