"""Normalize (SSD's L2 normalisation with a learned scale), as Caffe's SSD fork defines it.

across_spatial: 1 divides each sample by sqrt(sum of all its squares + eps); 0 divides
each position by sqrt(sum over `axis` (the channels) of x^2 + eps). Input 1 is the
scale: one value (channel_shared) or one per channel, along `axis`.
Layout AXIS: only `axis` moves with the layout; the batch axis stays first.
"""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis, permute_axis
from mace.ops.registry import Layout, OpSpec, SimpleKernel, kernel, register_op


@register_op("Normalize", layout=Layout.AXIS)
class Normalize(OpSpec):
    attrs = {"across_spatial": 1, "axis": 1, "eps": 1e-10}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]

    @staticmethod
    def remap_axes(op, perm, ranks):
        if perm[0] != 0:   # the per-sample sums need the batch axis first
            return None
        set_arg(op, "axis", permute_axis(get_arg(op, "axis", 1), perm, ranks[0]))
        return perm


def normalize(x, scale, axis: int, across_spatial: bool, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    sums = (x64 * x64).sum(axis=tuple(range(1, x.ndim)) if across_spatial else axis, keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = -1
    return x64 / np.sqrt(sums + eps) * np.asarray(scale, np.float64).reshape(shape)


@kernel("Normalize", "cpu")
class NormalizeCpu(SimpleKernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.across = bool(ctx.arg("across_spatial"))
        self.eps = float(ctx.arg("eps"))

    def compute(self, x, scale):
        return normalize(x, scale, self.axis, self.across, self.eps)
