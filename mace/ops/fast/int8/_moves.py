"""What the fast int8 pass-through ops share (ChannelShuffle, Transpose, Reshape): the float
fast kernel moves the uint8 bytes (its loops and copies take any numeric dtype), then an
output with a range of its own is requantized in place by the reference's 256-entry table
through a compiled lookup (_qloops.lookup) instead of numpy's take."""
from __future__ import annotations

from mace.ops._common import sequence
from mace.ops.fast._checks import NO_LOOPS
from mace.ops.fast.compute import ComputeContext, compute_of
from mace.ops.fast.int8._qjit import qloops


def rescale_step(compute: ComputeContext, table, out):
    """A step applying `table` to `out` in place (split on `compute`'s pool), or None where there
    is nothing to apply."""
    if table is None:
        return None
    flat = out.reshape(-1)   # arena tensors are contiguous: a view
    return compute.loop("lookup", (flat, table, flat), flat.size, 2 * flat.size, lib=qloops())


class FastMove:
    """Mixin before an int8 PassThrough kernel class: `mover` is the float fast kernel class."""

    mover = None

    @classmethod
    def check(cls, ctx) -> str | None:
        return NO_LOOPS if qloops() is None else super().check(ctx) or cls.mover.check(ctx)

    def setup(self, ctx):
        super().setup(ctx)   # the reference's: its float setup and the rescale tables
        self.move = self.mover(ctx)
        self.scratch_nbytes = self.move.scratch_nbytes

    def bind(self, inputs, outputs, scratch=None):
        if not all(out.flags.c_contiguous for out in outputs):
            return super().bind(inputs, outputs, scratch)
        steps = [self.move.bind(inputs, outputs, scratch)]
        compute = compute_of(self.ctx)
        steps += [s for table, out in zip(self.tables, outputs)
                  for s in [rescale_step(compute, table, out)] if s is not None]
        return sequence(steps)

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()
