"""Gather: pick slices of `data` along arg `axis` by integer `indices` (ONNX Gather).

Inputs: data, indices (any rank; negative values count from the end). Output
shape is data.shape[:axis] + indices.shape + data.shape[axis+1:]. Layout ANY:
the indices tensor is not an operand the NHWC pass could transpose.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


def wrap_indices(indices, dim, name="?"):
    """Indices with negative values made positive, as numpy's index type (intp: np.take refuses
    int64 indices where intp is 32 bits, as on armhf boards); out-of-range ones are an error."""
    idx = np.asarray(indices, np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise ValueError(f"Gather '{name}': indices out of range [-{dim}, {dim - 1}]")
    return np.where(idx < 0, idx + dim, idx).astype(np.intp, copy=False)


@register_op("Gather", layout=Layout.ANY)
class Gather(OpSpec):
    attrs = {"axis": 0}

    @staticmethod
    def infer(ctx):
        data, idx = ctx.shapes[0], ctx.shapes[1]
        axis = normalize_axis(ctx.arg("axis"), len(data))
        if ctx.values[1] is not None:  # check constant indices while converting
            wrap_indices(ctx.values[1], data[axis], ctx.op.name)
        return [(tuple(data[:axis]) + tuple(idx) + tuple(data[axis + 1:]), ctx.dtypes[0])]


@kernel("Gather", "cpu")
class GatherCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.dim = ctx.input_shapes[0][self.axis]
        self.name = ctx.op.name
        idx = ctx.consts[1]
        self.indices = None if idx is None else wrap_indices(idx, self.dim, self.name)

    def run(self, inputs, outputs):
        idx = self.indices if self.indices is not None else \
            wrap_indices(inputs[1], self.dim, self.name)
        np.take(inputs[0], idx, axis=self.axis, out=outputs[0])
