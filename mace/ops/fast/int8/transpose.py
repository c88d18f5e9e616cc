"""Transpose and Reshape, fast int8: the float fast kernels' copies on the uint8 codes (the
blocked / per-column transposes, the reshaped copy), rescaled where the output has its own
range (_moves.FastMove)."""
from __future__ import annotations

from mace.ops.fast.int8._moves import FastMove
from mace.ops.fast.reshape import ReshapeFast
from mace.ops.fast.transpose import TransposeFast
from mace.ops.int8.passthrough import ReshapeInt8, TransposeInt8
from mace.ops.registry import kernel


@kernel("Transpose", "int8:fast")
class TransposeInt8Fast(FastMove, TransposeInt8):
    mover = TransposeFast


@kernel("Reshape", "int8:fast")
class ReshapeInt8Fast(FastMove, ReshapeInt8):
    mover = ReshapeFast
