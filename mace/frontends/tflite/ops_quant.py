"""QUANTIZE, DEQUANTIZE and DENSIFY.

Constants were read as float32 already (model_file.TflTensor.real()), so a
DEQUANTIZE of a constant (fp16 weights, int8 weights of a hybrid model) folds to a
float32 constant at convert. On activations the graph stays float, and each integer
tensor's scale and zero point are kept as its range for the quantize pass
(frontend._record_quant_ranges). A QUANTIZE of a float tensor (the model's edge)
saturates as LiteRT's does: a CLIP to the range its integers can hold. A DEQUANTIZE,
and a QUANTIZE between two quantized tensors (a requantization, which keeps the
first tensor's range), become the tensor itself.
"""
import numpy as np

from mace.frontends.tflite.registry import tfl_op
from mace.ir.qat_ranges import record_ranges


@tfl_op("DENSIFY")
def densify(ctx, op):
    value = ctx.const(ctx.inp(op, 0))   # model_file expanded the sparse constant already
    if value is None:
        raise ctx.fail(op, "the input must be a sparse constant")
    src = ctx.add_const(ctx.temp(op, "value"), value)
    ctx.add("Identity", op, [src])


@tfl_op("DEQUANTIZE")
def dequantize(ctx, op):
    x = ctx.inp(op, 0)
    value = ctx.const(x)
    if value is not None:   # fp16 / int8 weights: a float32 constant from here on
        src = ctx.add_const(ctx.temp(op, "value"), np.asarray(value, np.float32))
        ctx.add("Identity", op, [src])   # folds at once unless it is a model output
        return
    ctx.alias(op, 0, x)


@tfl_op("QUANTIZE")
def quantize(ctx, op):
    source, target = ctx.tensor(op, 0), ctx.model.tensors[op.outputs[0]]
    bounds = target.real_range()
    if source.quantized or bounds is None:
        ctx.alias(op, 0, ctx.inp(op, 0))
        return
    x = ctx.inp(op, 0)
    ctx.add("Activation", op, [x], activation="CLIP",
            activation_coefficient=float(bounds[0]), max_limit=float(bounds[1]))
    # the float input is quantized with the same parameters (the CLIP changes nothing there)
    record_ranges(ctx.graph.net, [(x, bounds[0], bounds[1], bounds[2], 0)])
