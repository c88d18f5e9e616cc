"""Reshape: arg `dims` is the target shape; 0 copies the input dim (unless allowzero), -1 is inferred."""
import numpy as np

from mace.ops.registry import REQUIRED, Layout, OpSpec, SimpleKernel, kernel, register_op


def resolve_shape(in_shape, dims, allowzero=False):
    dims = list(dims)
    if not allowzero:
        dims = [in_shape[i] if d == 0 else d for i, d in enumerate(dims)]
    total = int(np.prod(in_shape))
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = total // known if known else 0
    if int(np.prod(dims)) != total:
        raise ValueError(f"cannot reshape {tuple(in_shape)} into {tuple(dims)}")
    return tuple(dims)


@register_op("Reshape", layout=Layout.ANY)
class Reshape(OpSpec):
    attrs = {"allowzero": 0, "dims": REQUIRED}

    @staticmethod
    def infer(ctx):
        dims = ctx.arg("dims")
        return [(resolve_shape(ctx.shapes[0], dims, ctx.arg("allowzero")), ctx.dtypes[0])]


@kernel("Reshape", "cpu")
class ReshapeCpu(SimpleKernel):
    def compute(self, x):
        return x  # SimpleKernel copies into the planned output shape
