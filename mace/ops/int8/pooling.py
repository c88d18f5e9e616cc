"""Quantized Pooling (MAX, AVG) on uint8 NHWC.

MAX is exact: the max of uint8 codes is the code of the max (the map is monotonic),
pads hold 0, the lowest code. Output range "input": without a range of its own the
output has the input's parameters and equals the float max pool of the dequantized
input bit for bit; with its own range one rescale table requantizes (monotonic too).

AVG sums (q - zero_point) in int64, pads contributing 0 (a real 0.0, as the float
kernel pads), then requantizes each output position by in_scale / (out_scale *
count) with its own integer multiplier (count: cells averaged, pads counted only
with count_include_pad). One rounding: error <= 0.5 output step against the float
average of the dequantized input.
"""
import numpy as np

from mace.ir import quant_params as qp
from mace.ir.args import get_arg
from mace.ops.conv2d import window
from mace.ops.int8._base import Int8Kernel, apply_table, quantized_io, rescale_table
from mace.ops.pooling import PoolingCpu
from mace.ops.registry import LOAD, kernel


@kernel("Pooling", "int8")
class PoolingInt8(Int8Kernel, PoolingCpu):
    output_range = "input"

    @staticmethod
    def check(ctx) -> str | None:
        if ctx.stage == LOAD:
            return quantized_io(ctx)
        kind = ctx.arg("pooling_type", "")
        return None if kind in ("MAX", "AVG") else f"pooling_type {kind} has no quantized form"

    @classmethod
    def requantizes(cls, op) -> bool:
        # AVG requantizes every output position (its own multipliers); MAX copies codes
        return get_arg(op, "pooling_type", "") == "AVG"

    def setup(self, ctx):
        super().setup(ctx)   # geometry, a uint8 padded buffer for MAX, divisors for AVG
        p_in, p_out = ctx.input_quant[0], ctx.output_quant[0]
        if self.is_max:
            self.table = rescale_table(p_in, p_out)
            return
        self.zero_in, self.zero_out = int(p_in.zero_point), int(p_out.zero_point)
        self.xp = np.zeros(self.xp.shape, np.int32)   # q - zero_point, pads 0
        self.acc = np.empty(ctx.output_shapes[0], np.int64)
        real = np.float64(p_in.scale) / (np.float64(p_out.scale) * self.divisor.astype(np.float64))
        self.mult, self.shift = qp.quantize_multiplier(real)

    def run(self, inputs, outputs):
        if self.is_max:
            super().run(inputs, outputs)
            if self.table is not None:
                apply_table(self.table, outputs[0], outputs[0])
            return
        p = self.pads
        _, h, w, _ = self.in_shape
        np.subtract(inputs[0], self.zero_in, out=self.xp[:, p[0]:p[0] + h, p[1]:p[1] + w, :],
                    dtype=np.int32)
        acc = self.acc
        acc[...] = 0
        for i in range(self.k[0]):
            for j in range(self.k[1]):
                acc += window(self.xp, i, j, self.dil, self.strides, self.out_hw)
        qp.requantize(acc, self.mult, self.shift, self.zero_out, outputs[0])
