"""RaggedToDense: a tensor whose length along one axis depends on the data, as exactly `size`
rows along it: its first `length` rows, zeros after (TensorFlow's Object Detection API pads the
detections it kept to max_total_size with `Pad(rows, [[0, size - n], [0, 0]])`).

Inputs: x (planned at its upper bound along `axis`), length (the rows it has, shape (1,)).
Args: `axis`, `size` (no smaller than the rows the run can have). The output has a static shape,
so what reads it need not follow the length (mark_ragged ends the data-dependent length here).
The rows past the length are written as zeros, not copied: an element-wise op on the way
(a class offset added) may have made the padding non-zero.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("RaggedToDense", layout=Layout.ANY)
class RaggedToDense(OpSpec):
    attrs = {"axis": REQUIRED, "size": REQUIRED}

    @staticmethod
    def infer(ctx):
        shape = list(ctx.shapes[0])
        axis, size = int(ctx.arg("axis")), int(ctx.arg("size"))
        if size < 0:
            raise ValueError(f"RaggedToDense '{ctx.op.name}': size {size} is negative")
        shape[axis] = size
        return [(tuple(shape), ctx.dtypes[0])]


@kernel("RaggedToDense", "cpu")
class RaggedToDenseCpu(Kernel):
    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        axis, n = int(self.ctx.arg("axis")), int(np.asarray(inputs[1]).reshape(-1)[0])
        if not 0 <= n <= min(out.shape[axis], x.shape[axis]):
            raise ValueError(f"RaggedToDense '{self.ctx.op.name}': {n} rows do not fit the "
                             f"{min(out.shape[axis], x.shape[axis])} planned along axis {axis}")
        out.fill(0)
        index = [slice(None)] * out.ndim
        index[axis] = slice(0, n)
        out[tuple(index)] = x[tuple(index)]
