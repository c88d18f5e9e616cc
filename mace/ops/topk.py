"""TopK: the k largest (arg `largest`=0: smallest) values along arg `axis`, and their int64 indices.

Args: k (resolved at convert), axis (default -1), largest (1), sorted (1). Equal values keep
their index order (ONNX: the lower index first). Layout ANY: `axis` counts in the framework's
layout.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("TopK", layout=Layout.ANY)
class TopK(OpSpec):
    @staticmethod
    def infer(ctx):
        shape = list(ctx.shapes[0])
        axis = normalize_axis(ctx.arg("axis", -1), len(shape))
        k = int(ctx.arg("k"))
        if not 0 <= k <= shape[axis]:
            raise ValueError(f"TopK '{ctx.op.name}': k={k} is outside [0, {shape[axis]}] on axis {axis}")
        shape[axis] = k
        return [(tuple(shape), ctx.dtypes[0]), (tuple(shape), np.int64)]


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
        self.axis = normalize_axis(ctx.arg("axis", -1), len(ctx.input_shapes[0]))
        self.k = int(ctx.arg("k"))
        self.largest = bool(ctx.arg("largest", 1))

    def run(self, inputs, outputs):
        x = inputs[0]
        idx = top_k_indices(x, self.k, self.axis, self.largest)
        np.copyto(outputs[0], np.take_along_axis(x, idx, axis=self.axis))
        np.copyto(outputs[1], idx)
