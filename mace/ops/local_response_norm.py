"""LocalResponseNorm across channels: y = x / (bias + alpha/size * sum_window(x^2))^beta.

The window spans channels [c - floor((size-1)/2), c + ceil((size-1)/2)], as ONNX
and Caffe define it. Args: size, alpha, beta, bias, data_format.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("LocalResponseNorm", layout=Layout.FIXED)
class LocalResponseNorm(OpSpec):
    attrs = {"alpha": 0.0001, "beta": 0.75, "bias": 1.0, "data_format": "NHWC", "size": REQUIRED}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


@kernel("LocalResponseNorm", "cpu")
class LocalResponseNormCpu(Kernel):
    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC"
        self.size = int(ctx.arg("size"))
        self.alpha, self.beta = ctx.arg("alpha"), ctx.arg("beta")
        self.bias = ctx.arg("bias")

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        c = x.shape[-1]
        lo, hi = (self.size - 1) // 2, (self.size - 1) - (self.size - 1) // 2
        sq = np.square(x, dtype=np.float64)
        csum = np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(sq, axis=-1)], axis=-1)
        idx = np.arange(c)
        window = csum[..., np.minimum(idx + hi + 1, c)] - csum[..., np.maximum(idx - lo, 0)]
        np.copyto(out, x / (self.bias + self.alpha / self.size * window) ** self.beta, casting="unsafe")
