"""StreamBuffer: a streaming layer's buffer of past frames, one op where the exporter wrote four.

A streaming model (TensorFlow's Stream layers, as microWakeWord's TFLite streams are exported)
keeps the last K frames of each layer's input in a variable and, every run,

    c = Concat(ReadVariable(V), x, axis)     the K old frames, then the T new ones
    AssignVariable(V, c[T:] along axis)     the last K frames for the next run

and its conv reads c. fuse_stream_buffer (mace/transform/passes) makes that one StreamBuffer
(inputs: x, V's initial value; args `variable`, `axis`): out = concat(V, x, axis), then V = the
last K entries of out along axis. The same values as the four ops (copies only), in one step
instead of four: each of the four was a call of ~0.5 us and a microWakeWord stream's whole run
is ~30 us over seven such buffers. The variable lives in the engine's store as AssignVariable's
does (mace/ops/variable.py): `engine.reset_state()` restores the initial value.
Layout AXIS: remap_axes permutes `axis`.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis, permute_axis
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op
from mace.ops.variable import defined_variable


@register_op("StreamBuffer", layout=Layout.AXIS)
class StreamBuffer(OpSpec):
    attrs = {"axis": REQUIRED, "variable": REQUIRED}
    side_effects = True   # the state for the next run: no pass may drop it for having no readers

    @staticmethod
    def infer(ctx):
        x, state = ctx.shapes[0], ctx.shapes[1]
        axis = normalize_axis(ctx.arg("axis"), len(state))
        if len(x) != len(state) or any(a != b for i, (a, b) in enumerate(zip(x, state)) if i != axis):
            raise ValueError(f"StreamBuffer '{ctx.op.name}': input {list(x)} does not extend the "
                             f"variable {list(state)} along axis {axis}")
        out = list(state)
        out[axis] += x[axis]
        return [(tuple(out), ctx.dtypes[1])]

    @staticmethod
    def remap_axes(op, perm, ranks):
        set_arg(op, "axis", permute_axis(get_arg(op, "axis"), perm, ranks[1]))
        return perm


@kernel("StreamBuffer", "cpu")
class StreamBufferCpu(Kernel):
    def setup(self, ctx):
        self.store, self.name = defined_variable(ctx)
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.output_shapes[0]))

    def run(self, inputs, outputs):
        shift(self.store.values[self.name], inputs[0], outputs[0], self.axis)


def shift(state, x, out, axis: int) -> None:
    """out = concat(state, x) along axis; then state = out's last state.shape[axis] entries."""
    np.concatenate([state, x], axis=axis, out=out, casting="unsafe")
    keep = out.shape[axis] - state.shape[axis]
    np.copyto(state, out[(slice(None),) * axis + (slice(keep, None),)], casting="unsafe")
