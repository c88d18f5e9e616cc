"""DynamicQuantize (ONNX DynamicQuantizeLinear), fast CPU kernel: one compiled loop
(_quantize_loops.dynamic_quantize) reading x twice, the reference's bytes. Float32 x and a
contiguous x and y (arena buffers are); else the reference runs."""
from __future__ import annotations

from functools import partial

from mace.ops.dynamic_quantize import DynamicQuantizeCpu
from mace.ops.fast._base import FastKernel
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import op_loops
from mace.ops.registry import kernel


@kernel("DynamicQuantize", "cpu:fast")
class DynamicQuantizeFast(FastKernel):
    @staticmethod
    def check(ctx) -> str | None:
        return not_float32(ctx, outputs=()) or (NO_LOOPS if op_loops("_quantize_loops") is None else None)

    def bind(self, inputs, outputs, scratch=None):
        x, (y, scale, zero) = inputs[0], outputs
        if not (x.flags.c_contiguous and y.flags.c_contiguous):
            return partial(DynamicQuantizeCpu.run, self, inputs, outputs)
        return partial(op_loops("_quantize_loops").dynamic_quantize, x.reshape(-1), y.reshape(-1),
                       scale.reshape(1), zero.reshape(1))
