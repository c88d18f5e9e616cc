"""SpaceToBatchND: zero-pad H and W, then move block_shape tiles into the batch axis.

Args: block_shape [bh, bw], paddings [top, left, bottom, right] (non-negative),
data_format. The padded H and W must be divisible by the block. Batch index
(i * bw + j) * N + n holds the pixels at rows i, i+bh, ... and columns j,
j+bw, ... of sample n (TensorFlow's definition). Usually it only appears around
a convolution, where flatten_atrous_conv turns the three ops into one dilated conv.
"""
import numpy as np

from mace.ops._common import from_nhwc_shape, to_nhwc_shape
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


def block_args(op_arg, name):
    block = [int(b) for b in op_arg("block_shape")]
    amounts = [int(p) for p in op_arg(name, [0, 0, 0, 0])]
    if len(block) != 2 or min(block) < 1:
        raise ValueError(f"block_shape {block} must be two positive sizes")
    if len(amounts) != 4 or min(amounts) < 0:
        raise ValueError(f"{name} {amounts} must be four non-negative amounts")
    return block, amounts


def plan(shape, block, pads):
    """The padded NHWC size and the output shape, for an NHWC input shape."""
    n, h, w, c = shape
    hp, wp = h + pads[0] + pads[2], w + pads[1] + pads[3]
    if hp % block[0] or wp % block[1]:
        raise ValueError(f"padded size {hp}x{wp} is not divisible by block_shape {block}")
    return (n, hp, wp, c), (n * block[0] * block[1], hp // block[0], wp // block[1], c)


@register_op("SpaceToBatchND", layout=Layout.FIXED)
class SpaceToBatchND(OpSpec):
    attrs = {"block_shape": REQUIRED, "data_format": "NHWC", "paddings": [0, 0, 0, 0]}

    @staticmethod
    def infer(ctx):
        fmt = ctx.arg("data_format")
        block, pads = block_args(ctx.arg, "paddings")
        _, out = plan(to_nhwc_shape(ctx.shapes[0], fmt), block, pads)
        return [(from_nhwc_shape(out, fmt), ctx.dtypes[0])]


@kernel("SpaceToBatchND", "cpu")
class SpaceToBatchNDCpu(Kernel):
    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC", "CPU SpaceToBatchND runs NHWC"
        self.block, self.pads = block_args(ctx.arg, "paddings")
        padded, _ = plan(tuple(ctx.input_shapes[0]), self.block, self.pads)
        self.xp = np.zeros(padded, ctx.input_dtypes[0])  # the border stays zero
        n, hp, wp, c = padded
        (bh, bw), oh, ow = self.block, hp // self.block[0], wp // self.block[1]
        self.view = (n, oh, bh, ow, bw, c)   # the padded input, tiles split out
        self.out6 = (bh, bw, n, oh, ow, c)   # the output, batch split into tile offsets

    def run(self, inputs, outputs):
        x, (t, left) = inputs[0], self.pads[:2]
        self.xp[:, t:t + x.shape[1], left:left + x.shape[2], :] = x
        np.copyto(outputs[0].reshape(self.out6), self.xp.reshape(self.view).transpose(2, 4, 0, 1, 3, 5))
