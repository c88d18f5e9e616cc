"""BatchNorm (inference form): y = x * scale + offset per channel, then a fused activation.

Inputs: x, scale (C), offset (C); the frontend folds mean/var/epsilon into
scale/offset. Arg data_format says which axis holds channels (1 for NCHW, the
last for NHWC). Usually folded into the preceding conv by fold_batchnorm.
"""
import numpy as np

from mace.ops._common import activation_args, apply_activation
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op


@register_op("BatchNorm", layout=Layout.FIXED)
class BatchNorm(OpSpec):
    attrs = {**FUSED_ACTIVATION, "data_format": "NHWC"}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


def channel_shape(rank, data_format, c):
    shape = [1] * rank
    shape[1 if data_format == "NCHW" and rank > 1 else rank - 1] = c
    return shape


@kernel("BatchNorm", "cpu")
class BatchNormCpu(Kernel):
    def setup(self, ctx):
        rank, fmt = len(ctx.input_shapes[0]), ctx.arg("data_format")
        c = ctx.input_shapes[2][0]
        self.scale = np.asarray(ctx.consts[1], np.float32).reshape(channel_shape(rank, fmt, c))
        self.offset = np.asarray(ctx.consts[2], np.float32).reshape(channel_shape(rank, fmt, c))
        self.act = activation_args(ctx)

    def run(self, inputs, outputs):
        out = outputs[0]
        np.multiply(inputs[0], self.scale, out=out)
        out += self.offset
        apply_activation(out, **self.act)
