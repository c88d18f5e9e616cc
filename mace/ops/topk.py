"""TopK: the k largest (arg `largest`=0: smallest) values along arg `axis`, and their int64 indices.

Args: k (resolved at convert), axis (default -1), largest (1), sorted (1). Equal values keep
their index order (ONNX: the lower index first). Layout ANY: `axis` counts in the framework's
layout. A k computed at run time comes as input 1 instead: both outputs are then planned at the
axis's full size and a third output, shape (1,), holds k (`OpSpec.ragged`, mace/ops/_ragged.py).
An input whose own length along `axis` depends on the data comes with that length as input 2
(mark_ragged): only its first rows are ranked, the padding after them never.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops._ragged import write_ragged
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("TopK", layout=Layout.ANY)
class TopK(OpSpec):
    attrs = {"axis": -1, "k": 0, "largest": 1}

    @staticmethod
    def infer(ctx):
        shape = list(ctx.shapes[0])
        axis = normalize_axis(ctx.arg("axis"), len(shape))
        if len(ctx.shapes) > 1:   # k known at run time: the whole axis is the bound
            return [(tuple(shape), ctx.dtypes[0]), (tuple(shape), np.int64), ((1,), np.int64)]
        k = int(ctx.arg("k"))
        if not 0 <= k <= shape[axis]:
            raise ValueError(f"TopK '{ctx.op.name}': k={k} is outside [0, {shape[axis]}] on axis {axis}")
        shape[axis] = k
        return [(tuple(shape), ctx.dtypes[0]), (tuple(shape), np.int64)]

    @staticmethod
    def ragged(op) -> dict:
        if len(op.input) < 2:
            return {}
        axis = next((a.i for a in op.arg if a.name == "axis"), -1)
        return {0: (axis, 2), 1: (axis, 2)}


def top_k_indices(x, k, axis, largest):
    """Indices of the top k along `axis`, best first, ties in index order (stable sorts)."""
    if not largest:
        order = np.argsort(x, axis=axis, kind="stable")
    else:
        # descending with ties by ascending index, for every dtype (negating overflows ints):
        # sort the flipped axis ascending, reverse the result, map positions back
        n = x.shape[axis]
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return np.take(order, np.arange(k), axis=axis)


@kernel("TopK", "cpu")
class TopKCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.k = int(ctx.arg("k"))
        self.largest = bool(ctx.arg("largest"))

    def run(self, inputs, outputs):
        x = inputs[0]
        if len(inputs) > 2:   # rows past the input's own length are padding
            x = np.take(x, np.arange(int(np.asarray(inputs[2]).reshape(-1)[0])), axis=self.axis)
        if len(inputs) > 1:
            return self._run_computed_k(x, inputs[1], outputs)
        idx = top_k_indices(x, self.k, self.axis, self.largest)
        np.copyto(outputs[0], np.take_along_axis(x, idx, axis=self.axis))
        np.copyto(outputs[1], idx)

    def _run_computed_k(self, x, k, outputs):
        k, n = int(np.asarray(k).reshape(-1)[0]), x.shape[self.axis]
        if not 0 <= k <= n:
            raise ValueError(f"k={k} is outside [0, {n}] on axis {self.axis}")
        idx = top_k_indices(x, k, self.axis, self.largest)
        write_ragged(outputs[0], np.take_along_axis(x, idx, axis=self.axis), self.axis, outputs[2])
        write_ragged(outputs[1], idx, self.axis, outputs[2])
