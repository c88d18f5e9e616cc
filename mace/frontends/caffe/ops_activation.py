"""Caffe neuron layers: ReLU, PReLU, Sigmoid, TanH, ELU, AbsVal, BNLL, Clip -> Activation /
Eltwise; Power, Exp, Log, Threshold -> chains of Eltwise (scale, shift, then the function)."""
import math

import numpy as np

from mace.frontends.caffe.registry import caffe_layer


@caffe_layer("ReLU")
def relu(ctx, layer):
    slope = float(layer.relu_param.negative_slope)
    if slope == 0:
        ctx.add("Activation", layer, [ctx.inp(layer)], activation="RELU")
    else:
        ctx.add("Activation", layer, [ctx.inp(layer)], activation="LEAKYRELU",
                activation_coefficient=slope)


@caffe_layer("PReLU")
def prelu(ctx, layer):
    x = ctx.inp(layer)
    shape = ctx.shape(x)
    channels = 1 if len(shape) < 2 or layer.prelu_param.channel_shared else shape[1]
    slope = ctx.weight(layer, 0, (channels,), 1)
    if len(shape) >= 2:  # broadcast along axis 1 (channels) of NC...
        slope = slope.reshape((channels,) + (1,) * (len(shape) - 2))
    ctx.add("Activation", layer, [x, ctx.new_const(layer, "slope", slope)], activation="PRELU")


def _simple(layer_type, kind):
    @caffe_layer(layer_type)
    def mapper(ctx, layer):
        ctx.add("Activation", layer, [ctx.inp(layer)], activation=kind)
    mapper.__name__ = f"map_{layer_type}"
    return mapper


_simple("Sigmoid", "SIGMOID")
_simple("TanH", "TANH")
_simple("BNLL", "SOFTPLUS")  # log(1 + e^x)


@caffe_layer("ELU")
def elu(ctx, layer):
    ctx.add("Activation", layer, [ctx.inp(layer)], activation="ELU",
            activation_coefficient=float(layer.elu_param.alpha))


@caffe_layer("AbsVal")
def abs_val(ctx, layer):
    ctx.add("Eltwise", layer, [ctx.inp(layer)], type="ABS")


@caffe_layer("Clip")
def clip(ctx, layer):
    p = layer.clip_param
    if not (p.HasField("min") and p.HasField("max")):
        raise ctx.fail(layer, "clip_param needs both min and max")
    ctx.add("Activation", layer, [ctx.inp(layer)], activation="CLIP",
            activation_coefficient=float(p.min), max_limit=float(p.max))


class _Chain:
    """Builds x -> f1 -> f2 -> ... as Eltwise ops, the last one writing the layer's top."""

    def __init__(self, ctx, layer):
        self.ctx, self.layer = ctx, layer
        self.steps = []

    def then(self, kind, const=None):
        self.steps.append((kind, const))
        return self

    def build(self):
        ctx, layer = self.ctx, self.layer
        x = ctx.inp(layer)
        if not self.steps:
            ctx.add("Identity", layer, [x])
            return
        for i, (kind, const) in enumerate(self.steps):
            inputs = [x] if const is None else [x, ctx.new_const(layer, kind.lower(), np.float32(const))]
            last = i == len(self.steps) - 1
            out = ctx.out(layer) if last else ctx.temp(layer, kind.lower())
            ctx.add("Eltwise", layer, inputs, [out], name=None if last else out, type=kind)
            x = out


def _scale_shift(chain, scale, shift):
    if scale != 1:
        chain.then("PROD", scale)
    if shift != 0:
        chain.then("SUM", shift)
    return chain


@caffe_layer("Power")
def power(ctx, layer):
    """y = (shift + scale * x) ^ power."""
    p = layer.power_param
    chain = _scale_shift(_Chain(ctx, layer), float(p.scale), float(p.shift))
    if p.power != 1:
        chain.then("POW", float(p.power))
    chain.build()


def _log_base(ctx, layer, base):
    if base == -1:
        return 1.0  # natural base e
    if base <= 0:
        raise ctx.fail(layer, f"base {base} must be positive (or -1 for e)")
    return math.log(base)


@caffe_layer("Exp")
def exp(ctx, layer):
    """y = base ^ (shift + scale * x) = e^(shift * ln base) * e^(scale * ln base * x)."""
    p = layer.exp_param
    ln_base = _log_base(ctx, layer, float(p.base))
    chain = _Chain(ctx, layer)
    if p.scale * ln_base != 1:
        chain.then("PROD", float(p.scale) * ln_base)
    chain.then("EXP")
    if p.shift != 0:
        chain.then("PROD", math.exp(float(p.shift) * ln_base))
    chain.build()


@caffe_layer("Log")
def log(ctx, layer):
    """y = log_base(shift + scale * x)."""
    p = layer.log_param
    ln_base = _log_base(ctx, layer, float(p.base))
    chain = _scale_shift(_Chain(ctx, layer), float(p.scale), float(p.shift)).then("LOG")
    if ln_base != 1:
        chain.then("PROD", 1.0 / ln_base)
    chain.build()


@caffe_layer("Threshold")
def threshold(ctx, layer):
    """y = 1 where x > threshold, else 0 (float)."""
    x = ctx.inp(layer)
    mask = ctx.temp(layer, "mask")
    limit = ctx.new_const(layer, "threshold", np.float32(layer.threshold_param.threshold))
    ctx.add("Eltwise", layer, [x, limit], [mask], name=mask, type="GREATER")
    ctx.add("Cast", layer, [mask], to="float32")
