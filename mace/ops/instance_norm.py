"""InstanceNorm: y = scale * (x - mean) / sqrt(var + epsilon) + bias, per sample and channel.

Inputs: x (rank >= 3), scale (C), bias (C), both constant. Mean and variance
are taken over the spatial axes of each (sample, channel). Args: epsilon,
data_format (NCHW: channels on axis 1; NHWC: channels last).
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("InstanceNorm", layout=Layout.FIXED)
class InstanceNorm(OpSpec):
    attrs = {"data_format": "NHWC", "epsilon": 1e-05}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


@kernel("InstanceNorm", "cpu")
class InstanceNormCpu(Kernel):
    def setup(self, ctx):
        rank = len(ctx.input_shapes[0])
        channels_last = ctx.arg("data_format") == "NHWC"
        self.axes = tuple(range(1, rank - 1)) if channels_last else tuple(range(2, rank))
        shape = [1] * rank
        shape[rank - 1 if channels_last else 1] = -1
        self.scale = np.asarray(ctx.consts[1], np.float32).reshape(shape)
        self.bias = np.asarray(ctx.consts[2], np.float32).reshape(shape)
        self.eps = float(ctx.arg("epsilon"))

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        np.subtract(x, x.mean(axis=self.axes, keepdims=True), out=out)
        # Two passes (centre, then square) so large means do not swamp the variance.
        var = np.square(out).mean(axis=self.axes, keepdims=True)
        out *= self.scale / np.sqrt(var + self.eps)
        out += self.bias
