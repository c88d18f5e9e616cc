"""Shared parts of DepthToSpace and SpaceToDepth: both are one reshape-transpose-reshape.

Channel order follows ONNX's NCHW definitions in either layout: DCR numbers
channels (block row, block column, channel), CRD numbers them (channel, block
row, block column). Each op module supplies `plan`, which gives the 6-D view
of the input and the transpose that turns it into the output.
"""
import numpy as np

from mace.ops.registry import Kernel


class SpaceDepthKernel(Kernel):
    """Copy `x.reshape(view).transpose(perm)` into the output (a view of it, no scratch)."""

    plan = None  # staticmethod(shape, block, mode, data_format) -> (view, perm, out_shape)

    def setup(self, ctx):
        self.view, self.perm, _ = type(self).plan(
            tuple(ctx.input_shapes[0]), int(ctx.arg("block_size")), ctx.arg("mode", "DCR"),
            ctx.arg("data_format", "NHWC"))
        self.out6 = tuple(self.view[p] for p in self.perm)

    def run(self, inputs, outputs):
        np.copyto(outputs[0].reshape(self.out6), inputs[0].reshape(self.view).transpose(self.perm))


def check_mode(mode):
    if mode not in ("DCR", "CRD"):
        raise ValueError(f"mode must be DCR or CRD, got '{mode}'")
