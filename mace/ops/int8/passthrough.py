"""Quantized pass-through ops: Reshape, Transpose, Identity, Split, DepthToSpace,
SpaceToDepth (each a two-line declaration here), and the PassThrough base that Pad
(pad.py), ChannelShuffle and the resizes build on. They move uint8 values without arithmetic.

Each reuses its float kernel (which only copies/gathers, so it works on uint8 as is)
and declares output_range "input": an output without a range of its own inherits
input 0's scale/zero point and is bit-for-bit the moved input (dequantized, exactly
the float op on the dequantized input). When the quantize pass did give an output its
own range, a 256-entry table requantizes every value (`rescale_table`, integer-only).
"""
from __future__ import annotations

from mace.ops.depth_to_space import DepthToSpaceCpu
from mace.ops.identity import IdentityCpu
from mace.ops.int8._base import Int8Kernel, rescale_table, apply_table
from mace.ops.registry import kernel
from mace.ops.reshape import ReshapeCpu
from mace.ops.space_to_depth import SpaceToDepthCpu
from mace.ops.split import SplitCpu
from mace.ops.transpose import TransposeCpu


class PassThrough(Int8Kernel):
    """Mixin over a float kernel: run it on uint8, then rescale outputs that need it."""

    output_range = "input"

    def setup(self, ctx):
        super().setup(ctx)
        self.tables = [rescale_table(ctx.input_quant[0], p) for p in ctx.output_quant]

    def run(self, inputs, outputs):
        super().run(inputs, outputs)
        for table, out in zip(self.tables, outputs):
            if table is not None:
                apply_table(table, out, out)


@kernel("Reshape", "int8")
class ReshapeInt8(PassThrough, ReshapeCpu):
    pass


@kernel("Transpose", "int8")
class TransposeInt8(PassThrough, TransposeCpu):
    pass


@kernel("Identity", "int8")
class IdentityInt8(PassThrough, IdentityCpu):
    pass


@kernel("Split", "int8")
class SplitInt8(PassThrough, SplitCpu):
    pass


@kernel("DepthToSpace", "int8")
class DepthToSpaceInt8(PassThrough, DepthToSpaceCpu):
    pass


@kernel("SpaceToDepth", "int8")
class SpaceToDepthInt8(PassThrough, SpaceToDepthCpu):
    pass
