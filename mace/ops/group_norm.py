"""GroupNorm: normalise each of `num_groups` channel groups over its channels and spatial axes,
then scale and shift per channel (ONNX GroupNormalization, opset 21 semantics).

Inputs: x (N, C, ...), scale (C), bias (C). Args: num_groups, epsilon (1e-5). The ONNX frontend
expands opset 18's per-group scale/bias to per-channel. Layout ANY (channels on axis 1).
"""
import numpy as np

from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("GroupNorm", layout=Layout.ANY)
class GroupNorm(OpSpec):
    attrs = {"epsilon": 1e-05, "num_groups": REQUIRED}

    @staticmethod
    def infer(ctx):
        shape = tuple(ctx.shapes[0])
        groups = int(ctx.arg("num_groups"))
        if len(shape) < 2 or groups <= 0 or shape[1] % groups:
            raise ValueError(f"GroupNorm '{ctx.op.name}': {shape[1] if len(shape) > 1 else '?'} channels "
                             f"do not split into {groups} groups")
        for s in ctx.shapes[1:]:
            if tuple(s) != (shape[1],):
                raise ValueError(f"GroupNorm '{ctx.op.name}': scale/bias shape {list(s)}, expected [{shape[1]}]")
        return [(shape, ctx.dtypes[0])]


@kernel("GroupNorm", "cpu")
class GroupNormCpu(Kernel):
    def setup(self, ctx):
        self.shape = tuple(ctx.input_shapes[0])
        self.groups = int(ctx.arg("num_groups"))
        self.eps = float(ctx.arg("epsilon"))
        self.per_channel = (1, self.shape[1]) + (1,) * (len(self.shape) - 2)

    def run(self, inputs, outputs):
        x = inputs[0].astype(np.float32, copy=False)
        g = x.reshape(self.shape[0], self.groups, -1)
        mean = g.mean(axis=2, keepdims=True)
        var = np.square(g - mean).mean(axis=2, keepdims=True)
        y = ((g - mean) / np.sqrt(var + self.eps)).reshape(self.shape)
        y = y * inputs[1].reshape(self.per_channel) + inputs[2].reshape(self.per_channel)
        np.copyto(outputs[0], y, casting="unsafe")
