"""ChannelShuffle on the GPU: one gather_permute (tensor.cl) over the (pixels, C/g, g) view.

Output element (p, i, j) of that view reads input element p*C + j*(C/g) + i, so the
whole shuffle stays on the GPU instead of a round trip to the CPU per shuffle.
"""
import numpy as np

from mace.ops.gpu._tensor import GatherGpu
from mace.ops.registry import kernel


@kernel("ChannelShuffle", "gpu")
class ChannelShuffleGpu(GatherGpu):
    def prepare(self, ctx):
        shape = ctx.input_shapes[0]
        c, g = shape[-1], int(ctx.arg("group"))
        pixels = int(np.prod(shape[:-1]))
        self.bind(ctx, (pixels, c // g, g), (c, 1, c // g))
