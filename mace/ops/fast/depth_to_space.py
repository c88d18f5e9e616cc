"""DepthToSpace, fast CPU kernel: the reference's 6-D reshape and transpose taken once, at load,
as views of the (contiguous) input and output; each run is one np.copyto between them."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.depth_to_space import plan
from mace.ops.fast._base import FastKernel
from mace.ops.registry import kernel


@kernel("DepthToSpace", "cpu:fast")
class DepthToSpaceFast(FastKernel):
    def setup(self, ctx):
        self.view, self.perm, _ = plan(tuple(ctx.input_shapes[0]), int(ctx.arg("block_size")),
                                       ctx.arg("mode", "DCR"), ctx.arg("data_format", "NHWC"))
        self.out6 = tuple(self.view[p] for p in self.perm)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if not (x.flags.c_contiguous and out.flags.c_contiguous):   # reshapes must be views
            return super().bind(inputs, outputs, scratch)
        return partial(np.copyto, out.reshape(self.out6), x.reshape(self.view).transpose(self.perm))

    def run(self, inputs, outputs):
        np.copyto(outputs[0].reshape(self.out6), inputs[0].reshape(self.view).transpose(self.perm))
