"""Quantized ResizeNearestNeighbor and ResizeBilinear on uint8 (output range "input").

Nearest is a gather: exact against the float op on the dequantized input when the
output keeps the input's parameters, one rescale table otherwise (<= 0.5 step).

Bilinear blends in fixed point: each axis's weights are rounded to WEIGHT_BITS (10)
fractional bits, w_lo + w_hi = 2**10 exactly. Rows then columns are blended on
(q - zero_point) in int32, leaving value * 2**20, and one requantize by
in_scale / (out_scale * 2**20) rounds to the output. Error against the float op on
the dequantized input: <= 0.5 output step from the rounding plus the weights'
rounding, <= 2 * 2**-11 * 255 input steps worst case (~0.25), so within 1 step
when the output keeps the input's scale.
"""
import numpy as np

from mace.ir import quant_params as qp
from mace.ops._resize import axis_params
from mace.ops.int8._base import Int8Kernel
from mace.ops.int8.passthrough import PassThrough
from mace.ops.registry import kernel
from mace.ops.resize_bilinear import ResizeBilinearCpu, linear_table
from mace.ops.resize_nearest import ResizeNearestNeighborCpu

WEIGHT_BITS = 10


@kernel("ResizeNearestNeighbor", "int8")
class ResizeNearestNeighborInt8(PassThrough, ResizeNearestNeighborCpu):
    pass


def fixed_point_table(in_len, out_len, scale, mode):
    """(lo index, hi index, lo weight, hi weight) with integer weights summing to 2**bits."""
    lo, hi, _, w_hi = linear_table(in_len, out_len, scale, mode)
    one = 1 << WEIGHT_BITS
    q_hi = np.rint(w_hi.astype(np.float64) * one).astype(np.int32)
    return lo, hi, one - q_hi, q_hi


@kernel("ResizeBilinear", "int8")
class ResizeBilinearInt8(Int8Kernel, ResizeBilinearCpu):
    output_range = "input"

    def setup(self, ctx):
        self.setup_layout(ctx)
        axes, mode = axis_params(ctx, ctx.input_shapes[0])
        (h, oh, sh), (w, ow, sw) = axes
        r_lo, r_hi, r_wlo, r_whi = fixed_point_table(h, oh, sh, mode)
        c_lo, c_hi, c_wlo, c_whi = fixed_point_table(w, ow, sw, mode)
        self.rows = (r_lo, r_hi, r_wlo[:, None, None], r_whi[:, None, None])
        self.cols = (c_lo, c_hi, c_wlo[:, None], c_whi[:, None])
        n, c = ctx.output_shapes[0][0], ctx.output_shapes[0][1 if self.nchw else 3]
        in_shape = (n, h, w, c)
        self.centred = np.empty(in_shape, np.int32)
        self.row_a = np.empty((n, oh, w, c), np.int32)
        self.row_b = np.empty_like(self.row_a)
        self.col_a = np.empty((n, oh, ow, c), np.int32)
        self.col_b = np.empty_like(self.col_a)
        p_in, p_out = ctx.input_quant[0], ctx.output_quant[0]
        self.zero_in, self.zero_out = int(p_in.zero_point), int(p_out.zero_point)
        real = np.float64(p_in.scale) / np.float64(p_out.scale) / float(1 << (2 * WEIGHT_BITS))
        self.mult, self.shift = qp.quantize_multiplier(real)

    def run(self, inputs, outputs):
        x, out = self.nhwc_views(inputs[0], outputs[0])
        np.subtract(x, self.zero_in, out=self.centred, dtype=np.int32)
        # the float kernel's gather-and-blend, here on int32 with integer weights
        self._blend(self.centred, self.rows, 1, self.row_a, self.row_b)
        self._blend(self.row_a, self.cols, 2, self.col_a, self.col_b)
        qp.requantize(self.col_a, self.mult, self.shift, self.zero_out, out)
        self.finish(outputs[0])
