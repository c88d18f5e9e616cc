"""Activations and normalisation: RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, LOGISTIC, TANH,
HARD_SWISH, LEAKY_RELU, PRELU, ELU, GELU, SOFTMAX, LOG_SOFTMAX."""
import numpy as np

from mace.frontends.tflite.registry import tfl_op

SIMPLE = {"RELU": {"activation": "RELU"}, "RELU6": {"activation": "RELUX", "max_limit": 6.0},
          "RELU_N1_TO_1": {"activation": "CLIP", "activation_coefficient": -1.0, "max_limit": 1.0},
          "RELU_0_TO_1": {"activation": "RELUX", "max_limit": 1.0},
          "LOGISTIC": {"activation": "SIGMOID"}, "TANH": {"activation": "TANH"},
          "HARD_SWISH": {"activation": "HARDSWISH"}, "ELU": {"activation": "ELU",
                                                               "activation_coefficient": 1.0}}


def _make(tfl_type, args):
    @tfl_op(tfl_type)
    def mapper(ctx, op):
        ctx.add("Activation", op, [ctx.inp(op, 0)], **args)
    mapper.__name__ = f"map_{tfl_type.lower()}"
    return mapper


for _t, _a in SIMPLE.items():
    _make(_t, _a)


@tfl_op("LEAKY_RELU")
def leaky_relu(ctx, op):
    ctx.add("Activation", op, [ctx.inp(op, 0)], activation="LEAKYRELU",
            activation_coefficient=float(ctx.options(op).Alpha()))


@tfl_op("GELU")
def gelu(ctx, op):
    approximate = bool(op.options.Approximate()) if op.options is not None else False
    ctx.add("Activation", op, [ctx.inp(op, 0)], activation="GELU_TANH" if approximate else "GELU")


@tfl_op("PRELU")
def prelu(ctx, op):
    x, alpha = ctx.inp(op, 0), ctx.inp(op, 1)
    if ctx.const(alpha) is None:
        raise ctx.fail(op, "alpha must be constant")
    ctx.add("Activation", op, [x, alpha], activation="PRELU")


@tfl_op("SOFTMAX", "LOG_SOFTMAX")
def softmax(ctx, op):
    x = ctx.inp(op, 0)
    beta = float(op.options.Beta()) if op.type == "SOFTMAX" and op.options is not None else 1.0
    if beta != 1.0:   # softmax(beta * x)
        scaled = ctx.temp(op, "scaled")
        b = ctx.add_const(ctx.temp(op, "beta"), np.float32(beta))
        ctx.add("Eltwise", op, [x, b], [scaled], name=scaled, type="PROD")
        x = scaled
    ctx.add("Softmax", op, [x], axis=-1, use_log=int(op.type == "LOG_SOFTMAX"))
