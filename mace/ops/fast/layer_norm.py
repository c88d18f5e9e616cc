"""LayerNorm over the last axis, float32, fast CPU kernel: one compiled loop per row
(_act_loops.layer_norm: the mean, the variance and the scaled output in three passes over a
row that stays in cache), with the residual Add before it fused where fuse_skip_layer_norm
made it the op's `skip` input, and a fused activation (fuse_activation) run in place after it.

Why: the reference is eight numpy calls over the tensor (mean, subtract, square, mean, sqrt,
divide, multiply, add); MiniLM-L3's seven LayerNorms of 16 x 384 were 17% of its run.
Declined (the reference runs): no numba, other dtypes, normalised axes other than the last
alone, the mean / inv-std outputs, a scale or bias that is not a constant per last-axis element.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import layer_norm as _reference
from mace.ops._common import activation_args, normalize_axis, sequence
from mace.ops.fast._base import FastKernel, activation_fn, clip_bounds
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import act_loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel


def per_channel(value, c: int):
    """A constant scale / bias as c contiguous float32, or None where it varies otherwise."""
    if value is None:
        return None
    v = np.asarray(value)
    if v.dtype.kind != "f" or any(d != 1 for d in v.shape[:-1]) or (v.ndim and v.shape[-1] not in (1, c)):
        return None
    return np.ascontiguousarray(np.broadcast_to(v.reshape(-1).astype(np.float32), (c,)))


def float_last_axis(ctx) -> str | None:
    shape = tuple(ctx.input_shapes[0])
    if act_loops() is None:
        return NO_LOOPS
    if not shape or shape[-1] == 0:
        return f"input shape {list(shape)} (rank >= 1, a last axis not empty)"
    if len(ctx.output_shapes) != 1:
        return f"{len(ctx.output_shapes)} outputs (mean / inverse std dev not written)"
    if normalize_axis(ctx.arg("axis", -1), len(shape)) != len(shape) - 1:
        return f"axis {ctx.arg('axis', -1)} is not the last"
    reason = not_float32(ctx)
    if reason:
        return reason
    skip = _reference.skip_input(ctx)
    if skip is not None and tuple(ctx.input_shapes[skip]) != shape:
        return "skip input's shape is not the input's"
    c = shape[-1]
    bias = ctx.consts[2] if _reference.has_bias(ctx) else np.zeros(1, np.float32)
    if per_channel(ctx.consts[1], c) is None or per_channel(bias, c) is None:
        return "scale or bias is not a float constant over the last axis"
    return None


@kernel("LayerNorm", "cpu:fast")
class LayerNormFast(FastKernel):
    check = staticmethod(float_last_axis)

    def setup(self, ctx):
        c = ctx.input_shapes[0][-1]
        self.scale = per_channel(ctx.consts[1], c)
        self.bias = per_channel(ctx.consts[2], c) if _reference.has_bias(ctx) else np.zeros(c, np.float32)
        self.eps = float(ctx.arg("epsilon", 1e-5))
        self.skip = _reference.skip_input(ctx)
        act = activation_args(ctx)
        # a fused clip (RELU, RELUX, CLIP) in the loop's store; another activation in place after it
        self.bounds = clip_bounds(act) or clip_bounds({})
        self.act = None if clip_bounds(act) is not None else activation_fn(act)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if not all(a.flags.c_contiguous for a in (x, out, inputs[self.skip or 0])):   # arena tensors are
            return _reference.LayerNormCpu(self.ctx).bind(inputs, outputs)
        c = x.shape[-1]
        x2, out2 = x.reshape(-1, c), out.reshape(-1, c)
        skip = inputs[self.skip].reshape(-1, c) if self.skip is not None else x2
        args = (x2, skip, self.skip is not None, self.scale, self.bias, self.eps, *self.bounds, out2)
        norm = compute_of(self.ctx).loop("layer_norm", args, x2.shape[0], 3 * x.size, lib=act_loops())
        return norm if self.act is None else sequence([norm, partial(self.act, out2)])
