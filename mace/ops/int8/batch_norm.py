"""Quantized BatchNorm: y = x * scale[c] + offset[c] per channel (NHWC), with a fused
RELU / RELUX as the output clamp.

A channel's output is a function of one byte, so the kernel is a [C, 256] table built at
load from the float scale and offset (kept float by the quantize pass: `float_inputs`):
code q of channel c -> clamp(rint((s_in * (q - z_in) * scale[c] + offset[c]) / s_out)
+ z_out), in float64. Error against the float op on the dequantized input: <= 0.5 output
step. DenseNet's pre-activation BatchNorms (after each Concat, where no conv can absorb
them) otherwise stay float, and each costs a Dequantize and a Quantize around it: 57 of
DenseNet-121's 92 ms quantized.
"""
import numpy as np

from mace.ir import quant_params as qp
from mace.ops.int8._base import UINT8_LEVELS, Int8Kernel, quantized_io
from mace.ops.registry import LOAD, kernel

FUSED = ("", "NOOP", "RELU", "RELUX")


def channel_tables(p_in, p_out, scale, offset, qmin: int, qmax: int) -> np.ndarray:
    """uint8 [C, 256]: the requantized output of every code in every channel."""
    real = np.float64(p_in.scale) * (np.arange(UINT8_LEVELS, dtype=np.float64) - int(p_in.zero_point))
    y = (real[None, :] * np.asarray(scale, np.float64).reshape(-1, 1)
         + np.asarray(offset, np.float64).reshape(-1, 1))
    q = np.rint(y / np.float64(p_out.scale)) + int(p_out.zero_point)
    return np.clip(q, qmin, qmax).astype(np.uint8)


@kernel("BatchNorm", "int8")
class BatchNormInt8(Int8Kernel):
    output_range = "own"
    float_inputs = (1, 2)   # scale, offset: read once at load into the tables

    @staticmethod
    def check(ctx) -> str | None:
        if ctx.stage == LOAD:
            return quantized_io(ctx)
        act = ctx.arg("activation")
        if act not in FUSED:
            return f"fused activation {act} has no quantized form (RELU/RELUX only)"
        if ctx.arg("data_format") == "NCHW":
            return "BatchNorm on NCHW data has no quantized form (channels last only)"
        if len(ctx.op.input) != 3 or any(c is None for c in ctx.consts[1:]):
            return "scale and offset must be constants"
        return None

    def setup(self, ctx):
        p_out = ctx.output_quant[0]
        qmin, qmax = qp.activation_clamp(ctx.arg("activation"), p_out, ctx.arg("max_limit"))
        self.tables = channel_tables(ctx.input_quant[0], p_out, ctx.consts[1], ctx.consts[2], qmin, qmax)
        c = self.tables.shape[0]
        self.base = np.arange(c, dtype=np.intp) * UINT8_LEVELS   # row offsets into the flat tables

    def run(self, inputs, outputs):
        x = inputs[0]
        index = x.astype(np.intp) + self.base   # broadcasts over the trailing channel axis
        np.take(self.tables.reshape(-1), index, out=outputs[0])
