"""Quantized ChannelShuffle: the float kernel moves uint8 values as they are (a pass-through)."""
from mace.ops.channel_shuffle import ChannelShuffleCpu
from mace.ops.int8.passthrough import PassThrough
from mace.ops.registry import Kernel, kernel


@kernel("ChannelShuffle", "int8")
class ChannelShuffleInt8(PassThrough, ChannelShuffleCpu):
    bind = Kernel.bind   # through PassThrough.run, which rescales an output with its own range
