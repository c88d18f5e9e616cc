"""StridedSlice, fast CPU kernel: the slice computed once, at load, as a view of the input;
each run is one copy from it (negative steps included: a view with negative strides): a small
one the compiled row copy, a larger one np.copyto (_base.copy_step).

The reference rebuilds the index tuple's view on every run and copies from it: the same copy,
plus ~1-2 us of Python a call, which is most of the time of the small slices exporters make
(a YOLO head's box halves, an audio model's frame crops). Any dtype: a copy is the same bytes.
"""
from __future__ import annotations

from mace.ops.fast._base import FastKernel, copy_step
from mace.ops.registry import kernel
from mace.ops.strided_slice import slices


@kernel("StridedSlice", "cpu:fast")
class StridedSliceFast(FastKernel):
    def setup(self, ctx):
        self.index = slices(ctx.arg, ctx.input_shapes[0], ctx.op.name)[0]

    def bind(self, inputs, outputs, scratch=None):
        return copy_step(outputs[0], inputs[0][self.index])
