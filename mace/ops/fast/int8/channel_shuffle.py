"""ChannelShuffle, fast int8: the float fast kernel's compiled pass over [pixels, C] on the
uint8 codes (the reference copies one strided group at a time), rescaled where the output
has its own range (_moves.FastMove)."""
from __future__ import annotations

from mace.ops.fast.channel_shuffle import ChannelShuffleFast
from mace.ops.fast.int8._moves import FastMove
from mace.ops.int8.channel_shuffle import ChannelShuffleInt8
from mace.ops.registry import kernel


@kernel("ChannelShuffle", "int8:fast")
class ChannelShuffleInt8Fast(FastMove, ChannelShuffleInt8):
    mover = ChannelShuffleFast
