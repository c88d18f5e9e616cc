"""LayerNorm: normalise over axes [axis, rank), then scale and shift (ONNX LayerNormalization).

Inputs: x, scale, optional bias (both broadcast against the normalised
trailing shape), and with arg `skip` 1 a last input of x's shape added to x first (a
residual Add fused by fuse_skip_layer_norm). Args: axis (default -1), epsilon (default 1e-5). Optional
outputs 2 and 3 are the mean and 1/std (shape of x with the normalised axes
set to 1). Statistics are computed in float32 like ONNX's default stash_type. A fused
`activation` (fuse_activation, CPU float models: openWakeWord's LayerNorm -> ReLU) applies to
output 0 after the shift.
Layout ANY: `axis` counts in the framework's layout.
"""
import numpy as np

from mace.ops._common import activation_args, apply_activation, broadcast_shape, normalize_axis
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op


def _axes(op_arg, rank):
    return tuple(range(normalize_axis(op_arg("axis", -1), rank), rank))


def skip_input(ctx):
    """The index of the residual input added to x first (arg `skip`), or None."""
    return len(ctx.input_shapes) - 1 if ctx.arg("skip", 0) else None


def has_bias(ctx) -> bool:
    return len(ctx.input_shapes) - (skip_input(ctx) is not None) > 2


@register_op("LayerNorm", layout=Layout.ANY)
class LayerNorm(OpSpec):
    attrs = {**FUSED_ACTIVATION, "axis": -1, "epsilon": 1e-05, "skip": 0}

    @staticmethod
    def infer(ctx):
        shape = tuple(ctx.shapes[0])
        axes = _axes(ctx.arg, len(shape))
        out = broadcast_shape(*ctx.shapes)
        if out != shape:
            raise ValueError(f"LayerNorm '{ctx.op.name}': scale/bias {ctx.shapes[1:]} do not "
                             f"broadcast to the input {shape}")
        stats = tuple(1 if i in axes else d for i, d in enumerate(shape))
        return [(shape, ctx.dtypes[0])] + [(stats, np.float32)] * (len(ctx.op.output) - 1)


@kernel("LayerNorm", "cpu")
class LayerNormCpu(Kernel):
    def setup(self, ctx):
        self.axes = _axes(ctx.arg, len(ctx.input_shapes[0]))
        self.eps = float(ctx.arg("epsilon"))
        self.skip, self.bias = skip_input(ctx), has_bias(ctx)
        self.act = activation_args(ctx)

    def run(self, inputs, outputs):
        x = inputs[0].astype(np.float32, copy=False)
        if self.skip is not None:
            x = x + inputs[self.skip]
        mean = x.mean(axis=self.axes, keepdims=True)
        centred = x - mean
        inv_std = 1.0 / np.sqrt(np.square(centred).mean(axis=self.axes, keepdims=True) + self.eps)
        y = centred * inv_std * inputs[1]
        if self.bias:
            y += inputs[2]
        np.copyto(outputs[0], apply_activation(y, **self.act), casting="unsafe")
        for out, stat in zip(outputs[1:], (mean, inv_std)):
            np.copyto(out, stat)
