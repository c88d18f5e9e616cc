"""BatchToSpaceND: the inverse of SpaceToBatchND: move batch tiles back into H and W, then crop.

Args: block_shape [bh, bw], crops [top, left, bottom, right] (non-negative),
data_format. The batch must be divisible by bh * bw; batch index
(i * bw + j) * N + n becomes rows i, i+bh, ... and columns j, j+bw, ... of
sample n (TensorFlow's definition).
"""
import numpy as np

from mace.ops._common import from_nhwc_shape, to_nhwc_shape
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op
from mace.ops.space_to_batch import block_args


def plan(shape, block, crops):
    """The uncropped NHWC size and the output shape, for an NHWC input shape."""
    nb, h, w, c = shape
    if nb % (block[0] * block[1]):
        raise ValueError(f"batch {nb} is not divisible by block_shape {block}")
    full = (nb // (block[0] * block[1]), h * block[0], w * block[1], c)
    out = (full[0], full[1] - crops[0] - crops[2], full[2] - crops[1] - crops[3], c)
    if min(out[1:3]) < 0:
        raise ValueError(f"crops {crops} are larger than the {full[1]}x{full[2]} result")
    return full, out


@register_op("BatchToSpaceND", layout=Layout.FIXED)
class BatchToSpaceND(OpSpec):
    attrs = {"block_shape": REQUIRED, "crops": [0, 0, 0, 0], "data_format": "NHWC"}

    @staticmethod
    def infer(ctx):
        fmt = ctx.arg("data_format")
        block, crops = block_args(ctx.arg, "crops")
        _, out = plan(to_nhwc_shape(ctx.shapes[0], fmt), block, crops)
        return [(from_nhwc_shape(out, fmt), ctx.dtypes[0])]


@kernel("BatchToSpaceND", "cpu")
class BatchToSpaceNDCpu(Kernel):
    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC", "CPU BatchToSpaceND runs NHWC"
        self.block, crops = block_args(ctx.arg, "crops")
        nb, h, w, c = ctx.input_shapes[0]
        full, out = plan((nb, h, w, c), self.block, crops)
        self.view = (self.block[0], self.block[1], full[0], h, w, c)
        self.full = np.empty(full, ctx.input_dtypes[0])
        self.crop = (slice(None), slice(crops[0], crops[0] + out[1]), slice(crops[1], crops[1] + out[2]))

    def run(self, inputs, outputs):
        b0, b1, n, h, w, c = self.view
        full6 = self.full.reshape(n, h, b0, w, b1, c)
        np.copyto(full6, inputs[0].reshape(self.view).transpose(2, 3, 0, 4, 1, 5))
        np.copyto(outputs[0], self.full[self.crop])
