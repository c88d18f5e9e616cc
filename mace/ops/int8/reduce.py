"""Quantized Reduce: MEAN (e.g. global average pooling over H, W), MAX, MIN.

MEAN sums (q - zero_point) over the reduced axes and requantizes once by
in_scale / (out_scale * count): <= 0.5 output step against the float mean of the
dequantized input. The sum is an int32 accumulator, so up to 8 million cells.
MAX / MIN pick codes (monotonic): exact when the output keeps the input's
parameters (output range "input"), one rescale table otherwise. The other
reductions stay float.
"""
import numpy as np

from mace.ir import quant_params as qp
from mace.ir.args import get_arg
from mace.ops.int8._base import Int8Kernel, apply_table, quantized_io, rescale_table
from mace.ops.reduce import reduce_axes
from mace.ops.registry import LOAD, kernel

SUPPORTED = ("MEAN", "MAX", "MIN")


@kernel("Reduce", "int8")
class ReduceInt8(Int8Kernel):
    output_range = "input"

    @staticmethod
    def check(ctx) -> str | None:
        if ctx.stage == LOAD:
            return quantized_io(ctx)
        op = ctx.op
        kind = get_arg(op, "reduce_type", "")
        if kind not in SUPPORTED:
            return f"Reduce {kind} has no quantized form (only {', '.join(SUPPORTED)})"
        shape = ctx.input_shapes[0]
        axes = reduce_axes(lambda n, d=None: get_arg(op, n, d), len(shape))
        if any(shape[a] == 0 for a in axes):
            return "reduces over an empty axis"
        return None

    def setup(self, ctx):
        self.kind = ctx.arg("reduce_type")
        self.axes = reduce_axes(ctx.arg, len(ctx.input_shapes[0]))
        p_in, p_out = ctx.input_quant[0], ctx.output_quant[0]
        if self.kind != "MEAN" or not self.axes:
            self.table = rescale_table(p_in, p_out)
            return
        count = int(np.prod([ctx.input_shapes[0][a] for a in self.axes]))
        self.zero_in, self.zero_out = int(p_in.zero_point), int(p_out.zero_point)
        real = np.float64(p_in.scale) / (np.float64(p_out.scale) * count)
        self.mult, self.shift = qp.quantize_multiplier(real)

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        if not self.axes:
            apply_table(self.table, x, out)
        elif self.kind == "MEAN":
            total = np.subtract(x, self.zero_in, dtype=np.int64).sum(axis=self.axes, keepdims=True)
            qp.requantize(total.reshape(out.shape), self.mult, self.shift, self.zero_out, out)
        else:
            pick = np.max if self.kind == "MAX" else np.min
            apply_table(self.table, pick(x, axis=self.axes, keepdims=True).reshape(out.shape), out)
