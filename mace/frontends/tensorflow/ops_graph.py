"""Graph plumbing: Placeholder, PlaceholderWithDefault, Const, Identity, IdentityN,
StopGradient, Snapshot, NoOp, and fake quantization.

Identities need no op: their outputs are aliases of their inputs (an op is
emitted only when the tensor is a model output). FakeQuantWithMinMaxVars/Args
on a constant (weights) is applied here, exactly as TensorFlow does; on an activation it
becomes a FakeQuantize op (TensorFlow's nudged grid) and its range is kept as net args for
quantization:
fake_quant_tensors, fake_quant_min, fake_quant_max, fake_quant_num_bits,
fake_quant_narrow_range (parallel lists; see docs/tensorflow.md).
"""
import numpy as np

from mace.frontends.tensorflow.registry import tf_op


@tf_op("Placeholder")
def placeholder(ctx, node):
    # Fed placeholders are never converted (the walk stops at the inputs).
    raise ctx.fail(node, "the outputs depend on this placeholder, but input_tensors does not list it")


@tf_op("PlaceholderWithDefault")
def placeholder_with_default(ctx, node):
    ctx.alias(node, 0, ctx.inp(node, 0))  # not fed: its default value flows


@tf_op("Const")
def const(ctx, node):
    value = ctx.attr(node, "value")
    if value.dtype.kind not in "biuf":
        raise ctx.fail(node, f"constants of type {value.dtype} are not supported")
    ctx.const_output(node, 0, value)


@tf_op("Identity", "StopGradient", "Snapshot", "PreventGradient", "EnsureShape")
def identity(ctx, node):
    ctx.alias(node, 0, ctx.inp(node, 0))


@tf_op("IdentityN")
def identity_n(ctx, node):
    for i, source in enumerate(ctx.inputs(node)):
        ctx.alias(node, i, source)


@tf_op("NoOp")
def no_op(ctx, node):
    pass  # control dependencies only


def nudged_range(lo, hi, num_bits, narrow_range):
    """TensorFlow's FakeQuant nudging, in float32: (nudged min, nudged max, scale, 1 / scale)
    with the range moved so that 0 is exactly representable."""
    f32 = np.float32
    qmin, qmax = f32(1 if narrow_range else 0), f32((1 << num_bits) - 1)
    lo, hi = f32(lo), f32(hi)
    scale, inv_scale = (hi - lo) / (qmax - qmin), (qmax - qmin) / (hi - lo)
    zero_from_min = qmin - lo / scale
    if zero_from_min < qmin:
        zero = qmin
    elif zero_from_min > qmax:
        zero = qmax
    else:
        zero = f32(np.floor(zero_from_min + f32(0.5)))  # std::round of a non-negative value
    return (qmin - zero) * scale, (qmax - zero) * scale, scale, inv_scale


def fake_quant(x, lo, hi, num_bits=8, narrow_range=False, divide=True):
    """What TensorFlow's FakeQuant kernels compute, operation for operation in float32:
    FakeQuantWithMinMaxVars divides by the scale (`divide`), ...Args multiplies by its inverse."""
    f32 = np.float32
    nmin, nmax, scale, inv_scale = nudged_range(lo, hi, num_bits, narrow_range)
    quant_zero = np.floor(-nmin * inv_scale + f32(0.5))
    shifted = np.clip(np.asarray(x, f32), nmin, nmax) - nmin
    steps = shifted / scale if divide else shifted * inv_scale
    return (np.floor(steps - quant_zero + f32(0.5)) * scale).astype(f32)


@tf_op("FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxArgs")
def fake_quant_op(ctx, node):
    x = ctx.inp(node, 0)
    if node.op == "FakeQuantWithMinMaxArgs":
        lo, hi = float(ctx.attr(node, "min", -6.0)), float(ctx.attr(node, "max", 6.0))
    else:
        lo = float(ctx.static(node, 1, "min").reshape(-1)[0])
        hi = float(ctx.static(node, 2, "max").reshape(-1)[0])
    if not lo < hi:
        raise ctx.fail(node, f"range [{lo}, {hi}] is empty")
    bits, narrow = int(ctx.attr(node, "num_bits", 8)), int(bool(ctx.attr(node, "narrow_range", False)))
    value = ctx.const(x)
    if value is not None:  # quantized weights: apply it now, so results match TensorFlow
        divide = node.op == "FakeQuantWithMinMaxVars"
        ctx.const_output(node, 0, fake_quant(value, lo, hi, bits, narrow, divide))
        return
    # on an activation: its rounding in a float run (FakeQuantize on the nudged grid; ties go
    # half to even where TensorFlow rounds half up), its range for the quantize pass, which
    # turns the op back into the clamp it implies (lower_fake_quantize)
    nmin, _, scale, _ = nudged_range(lo, hi, bits, narrow)
    qmin, qmax = (1 if narrow else 0), (1 << bits) - 1
    zero = qmin - int(np.rint(nmin / scale))
    out = ctx.out(node)
    ctx.add("FakeQuantize", node, [x], [out], scale=float(scale), zero_point=zero,
            quant_min=qmin, quant_max=qmax)
    ctx.fake_quant.extend([(x, lo, hi, bits, narrow), (out, lo, hi, bits, narrow)])
