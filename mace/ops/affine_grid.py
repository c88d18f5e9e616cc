"""AffineGrid: the sampling grid of an affine transform theta (ONNX AffineGrid; the first half of
a spatial transformer network, GridSample is the second).

Input theta (N, 2, 3) for 2-D or (N, 3, 4) for 3-D. Arg size: the output image's full size
[N, C, H, W] or [N, C, D, H, W]; align_corners (-1 and 1 at the corner pixels' centres, else at
their outer edges). Output (N, H, W, 2) or (N, D, H, W, 3): theta applied to each pixel's
normalised (x, y[, z], 1). Layout ANY.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("AffineGrid", layout=Layout.ANY)
class AffineGrid(OpSpec):
    attrs = {"align_corners": 0, "size": REQUIRED}

    @staticmethod
    def infer(ctx):
        theta, size = tuple(ctx.shapes[0]), [int(s) for s in ctx.arg("size")]
        dims = len(size) - 2
        if dims not in (2, 3) or theta != (size[0], dims, dims + 1):
            raise ValueError(f"AffineGrid '{ctx.op.name}': theta {list(theta)} does not fit size {size}")
        return [(tuple(size[:1] + size[2:]) + (dims,), ctx.dtypes[0])]


def _line(n, align):
    if align:
        return np.linspace(-1, 1, n) if n > 1 else np.zeros(1)
    return (np.arange(n) * 2 + 1) / n - 1


@kernel("AffineGrid", "cpu")
class AffineGridCpu(Kernel):
    def setup(self, ctx):
        size = [int(s) for s in ctx.arg("size")]
        align = bool(ctx.arg("align_corners"))
        lines = [_line(n, align) for n in size[2:]]                   # outer (D/H) ... inner (W)
        mesh = np.meshgrid(*lines, indexing="ij")
        # homogeneous (x, y[, z], 1): the innermost axis first, as grid coordinates are ordered
        self.base = np.stack([m.ravel() for m in mesh[::-1]] + [np.ones(mesh[0].size)], axis=1)
        self.shape = ctx.output_shapes[0]

    def run(self, inputs, outputs):
        theta = inputs[0].astype(np.float64)
        grid = np.einsum("pk,nck->npc", self.base, theta)
        np.copyto(outputs[0], grid.reshape(self.shape), casting="unsafe")
