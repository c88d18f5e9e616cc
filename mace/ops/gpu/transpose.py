"""Transpose on the GPU: a gather from the input image through permuted strides."""
from __future__ import annotations

from mace.ops.gpu._tensor import GatherGpu, strides
from mace.ops.registry import kernel


@kernel("Transpose", "gpu")
class TransposeGpu(GatherGpu):
    @classmethod
    def check(cls, ctx):
        reason = super().check(ctx)
        if reason:
            return reason
        return None if len(ctx.input_shapes[0]) >= 1 else "a scalar transpose"

    def prepare(self, ctx):
        perm = list(ctx.arg("dims") or range(len(ctx.input_shapes[0]))[::-1])  # out i = in dims[i]
        in_strides = strides(ctx.input_shapes[0])
        self.bind(ctx, ctx.output_shapes[0], [in_strides[p] for p in perm])
