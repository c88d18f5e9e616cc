"""RMSNorm: y = x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale (ONNX RMSNormalization).

Inputs: x, scale (broadcast against the normalised trailing shape). Args: axis (-1), epsilon
(1e-5). Statistics in float32 (ONNX's default stash_type). The normalisation of LLaMA-style
transformers. Layout ANY.
"""
import numpy as np

from mace.ops._common import broadcast_shape, normalize_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("RMSNorm", layout=Layout.ANY)
class RMSNorm(OpSpec):
    attrs = {"axis": -1, "epsilon": 1e-05}

    @staticmethod
    def infer(ctx):
        shape = tuple(ctx.shapes[0])
        normalize_axis(ctx.arg("axis"), len(shape))
        if broadcast_shape(*ctx.shapes) != shape:
            raise ValueError(f"RMSNorm '{ctx.op.name}': scale {list(ctx.shapes[1])} does not "
                             f"broadcast to the input {list(shape)}")
        return [(shape, ctx.dtypes[0])]


@kernel("RMSNorm", "cpu")
class RMSNormCpu(Kernel):
    def setup(self, ctx):
        rank = len(ctx.input_shapes[0])
        self.axes = tuple(range(normalize_axis(ctx.arg("axis"), rank), rank))
        self.eps = float(ctx.arg("epsilon"))

    def run(self, inputs, outputs):
        x = inputs[0].astype(np.float32, copy=False)
        inv = 1.0 / np.sqrt(np.square(x).mean(axis=self.axes, keepdims=True) + self.eps)
        np.copyto(outputs[0], x * inv * inputs[1], casting="unsafe")
