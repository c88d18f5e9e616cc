"""Eltwise: element-wise math with numpy broadcasting, one op type for all of it.

Arg `type` picks the function: binary SUM SUB PROD DIV MIN MAX POW SQR_DIFF
FLOOR_DIV MOD EQUAL NOT_EQUAL GREATER GREATER_EQUAL LESS LESS_EQUAL AND OR XOR,
n-ary SUM/MIN/MAX/MEAN over any number of inputs, unary NEG ABS SQRT RSQRT EXP
LOG ERF RECIPROCAL SQUARE FLOOR CEIL ROUND SIGN NOT SIN COS TAN ASIN ACOS ATAN SINH
COSH ASINH ACOSH ATANH, and the bool tests ISNAN ISINF ISPOSINF ISNEGINF. A fused activation
(activation, max_limit, activation_coefficient) may follow.
"""
import math

import numpy as np

from mace.ops._common import activation_args, apply_activation, broadcast_shape
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _np_erf(x):
    try:
        from scipy.special import erf  # fast when scipy is present
        return erf(x)
    except ImportError:
        return _erf(x)


BINARY = {
    "SUB": np.subtract, "DIV": None, "POW": np.power,
    "SQR_DIFF": lambda a, b: np.square(a - b),
    "FLOOR_DIV": np.floor_divide, "MOD": None,
    "EQUAL": np.equal, "NOT_EQUAL": np.not_equal, "GREATER": np.greater,
    "GREATER_EQUAL": np.greater_equal, "LESS": np.less, "LESS_EQUAL": np.less_equal,
    "AND": np.logical_and, "OR": np.logical_or, "XOR": np.logical_xor,
}
NARY = {"SUM": np.add, "PROD": np.multiply, "MIN": np.minimum, "MAX": np.maximum}
UNARY = {
    "NEG": np.negative, "ABS": np.abs, "SQRT": np.sqrt, "RSQRT": lambda x: 1.0 / np.sqrt(x),
    "EXP": np.exp, "LOG": np.log, "ERF": _np_erf, "RECIPROCAL": np.reciprocal,
    "SQUARE": np.square, "FLOOR": np.floor, "CEIL": np.ceil, "ROUND": np.round,
    "SIGN": np.sign, "NOT": np.logical_not, "SIN": np.sin, "COS": np.cos, "TAN": np.tan,
    "ASIN": np.arcsin, "ACOS": np.arccos, "ATAN": np.arctan, "SINH": np.sinh, "COSH": np.cosh,
    "ASINH": np.arcsinh, "ACOSH": np.arccosh, "ATANH": np.arctanh,
    "ISNAN": np.isnan, "ISINF": np.isinf, "ISPOSINF": np.isposinf, "ISNEGINF": np.isneginf,
}
BOOL_RESULT = {"EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
               "AND", "OR", "XOR", "NOT", "ISNAN", "ISINF", "ISPOSINF", "ISNEGINF"}


@register_op("Eltwise", layout=Layout.ELEMENTWISE)
class Eltwise(OpSpec):
    attrs = {**FUSED_ACTIVATION, "fmod": 0, "type": ""}

    @staticmethod
    def infer(ctx):
        kind = ctx.arg("type")
        if kind not in BINARY and kind not in NARY and kind not in UNARY and kind != "MEAN":
            raise ValueError(f"Eltwise '{ctx.op.name}': unknown type {kind}")
        if kind in BOOL_RESULT:
            dtype = np.bool_
        elif kind == "POW":  # the exponent's type never changes the result's (ONNX Pow)
            dtype = ctx.dtypes[0]
        else:
            dtype = np.result_type(*ctx.dtypes)
        return [(broadcast_shape(*ctx.shapes), dtype)]


def _div(a, b):
    if np.issubdtype(np.result_type(a, b), np.integer):
        return np.trunc(np.divide(a, b)).astype(np.result_type(a, b))
    return np.divide(a, b)


def _mod(a, b, fmod):
    return np.fmod(a, b) if fmod else np.mod(a, b)


def evaluate(kind, inputs, fmod=0):
    """Reference result of Eltwise `kind` on numpy `inputs` (used by kernels and folding)."""
    if kind in UNARY:
        return UNARY[kind](inputs[0])
    if kind == "MEAN":
        return sum(inputs[1:], inputs[0]) / len(inputs)
    if kind in NARY:
        result = inputs[0]
        for x in inputs[1:]:
            result = NARY[kind](result, x)
        return result
    if kind == "DIV":
        return _div(*inputs)
    if kind == "MOD":
        return _mod(*inputs, fmod)
    return BINARY[kind](*inputs)


@kernel("Eltwise", "cpu")
class EltwiseCpu(Kernel):
    def setup(self, ctx):
        self.kind = ctx.arg("type")
        self.fmod = ctx.arg("fmod")
        self.act = activation_args(ctx)
        # Constant operands are cast once, here, not on every run.
        dtype = ctx.output_dtypes[0] if self.kind not in BOOL_RESULT else None
        self.consts = [None if c is None else (np.asarray(c, dtype) if dtype is not None else c)
                       for c in ctx.consts]
        if self.kind == "POW" and ctx.consts[1] is not None:
            self.consts[1] = ctx.consts[1]  # an int base keeps a float exponent (x ** 0.5)
        self.inplace = self.kind in ("SUM", "PROD", "MIN", "MAX", "SUB") and len(ctx.consts) == 2 \
            and ctx.output_dtypes[0] == np.float32

    def run(self, inputs, outputs):
        ins = [c if c is not None else x for c, x in zip(self.consts, inputs)]
        out = outputs[0]
        if self.inplace:
            fn = NARY.get(self.kind) or BINARY[self.kind]
            fn(ins[0], ins[1], out=out)
        else:
            np.copyto(out, evaluate(self.kind, ins, self.fmod), casting="unsafe")
        if out.dtype.kind == "f":
            apply_activation(out, **self.act)
