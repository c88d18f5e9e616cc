"""StridedSlice: x[start:end:step] on chosen axes, with ONNX Slice's clamping rules.

Args (lists of equal length): starts, ends, axes, steps. Negative starts/ends
count from the end (dim is added once); then, for a positive step, start and
end clamp to [0, dim]; for a negative step start clamps to [0, dim - 1] and
end to [-1, dim - 1], -1 meaning "past index 0". Unlike Python, a start still
below 0 clamps to 0 for a negative step. Axes not listed are kept whole.
Layout AXIS: remap_axes permutes `axes`.
"""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


def _clamp(v, lo, hi):
    return min(max(v, lo), hi)


def axis_slice(start, end, step, dim):
    """A Python slice equal to ONNX's start:end:step on an axis of size `dim`, and its length."""
    start, end, step = int(start), int(end), int(step)
    if step == 0:
        raise ValueError("slice step must not be 0")
    if dim == 0:
        return slice(0, 0), 0
    start += dim if start < 0 else 0
    end += dim if end < 0 else 0
    if step > 0:
        start, end = _clamp(start, 0, dim), _clamp(end, 0, dim)
    else:
        start, end = _clamp(start, 0, dim - 1), _clamp(end, -1, dim - 1)
    n = len(range(start, end, step))
    # end == -1 means "past index 0"; a Python slice would read it as dim - 1.
    return slice(start, end if end >= 0 else None, step), n


def slices(op_arg, shape, name="?"):
    starts, ends = op_arg("starts"), op_arg("ends")
    axes = op_arg("axes", None) or list(range(len(starts)))
    steps = op_arg("steps", None) or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError(f"StridedSlice '{name}': starts, ends, axes and steps differ in length")
    index = [slice(None)] * len(shape)
    out = list(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = normalize_axis(a, len(shape))
        index[a], out[a] = axis_slice(s, e, st, shape[a])
    return tuple(index), tuple(out)


@register_op("StridedSlice", layout=Layout.AXIS)
class StridedSlice(OpSpec):
    attrs = {"axes": None, "ends": REQUIRED, "starts": REQUIRED, "steps": None}

    @staticmethod
    def infer(ctx):
        return [(slices(ctx.arg, ctx.shapes[0], ctx.op.name)[1], ctx.dtypes[0])]

    @staticmethod
    def remap_axes(op, perm, ranks):
        starts = get_arg(op, "starts")
        axes = get_arg(op, "axes", None) or list(range(len(starts)))
        set_arg(op, "axes", [list(perm).index(normalize_axis(a, ranks[0])) for a in axes])
        return perm


@kernel("StridedSlice", "cpu")
class StridedSliceCpu(Kernel):
    def setup(self, ctx):
        self.index = slices(ctx.arg, ctx.input_shapes[0], ctx.op.name)[0]

    def run(self, inputs, outputs):
        np.copyto(outputs[0], inputs[0][self.index])
