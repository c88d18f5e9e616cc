"""Element-wise math (-> Eltwise; numpy broadcasting is TFLite's), reductions (-> Reduce),
ARG_MAX/ARG_MIN, CAST, SELECT/SELECT_V2.

ADD, SUB, MUL and DIV carry a fused activation, which becomes the Eltwise's own.
"""
import numpy as np

from mace.frontends.tf_common.math import add_n, axis_list, reduce_axes
from mace.frontends.tflite.registry import tfl_op

BINARY = {"ADD": "SUM", "SUB": "SUB", "MUL": "PROD", "DIV": "DIV", "MAXIMUM": "MAX", "MINIMUM": "MIN",
          "SQUARED_DIFFERENCE": "SQR_DIFF", "POW": "POW", "FLOOR_DIV": "FLOOR_DIV", "FLOOR_MOD": "MOD",
          "EQUAL": "EQUAL", "NOT_EQUAL": "NOT_EQUAL", "GREATER": "GREATER",
          "GREATER_EQUAL": "GREATER_EQUAL", "LESS": "LESS", "LESS_EQUAL": "LESS_EQUAL",
          "LOGICAL_AND": "AND", "LOGICAL_OR": "OR"}
UNARY = {"ABS": "ABS", "EXP": "EXP", "LOG": "LOG", "SQRT": "SQRT", "RSQRT": "RSQRT", "NEG": "NEG",
         "SQUARE": "SQUARE", "FLOOR": "FLOOR", "CEIL": "CEIL", "ROUND": "ROUND", "SIN": "SIN",
         "COS": "COS", "SIGN": "SIGN", "LOGICAL_NOT": "NOT"}
FUSED_ACTIVATION = {"ADD", "SUB", "MUL", "DIV"}


def _make(tfl_type, kind):
    @tfl_op(tfl_type)
    def mapper(ctx, op):
        act = ctx.fused(op) if tfl_type in FUSED_ACTIVATION else {}
        ctx.add("Eltwise", op, ctx.inputs(op), type=kind, **act)
    mapper.__name__ = f"map_{tfl_type.lower()}"
    return mapper


for _t, _k in {**BINARY, **UNARY}.items():
    _make(_t, _k)


tfl_op("ADD_N")(add_n)   # TensorFlow's AddN


REDUCE = {"MEAN": "MEAN", "SUM": "SUM", "REDUCE_MAX": "MAX", "REDUCE_MIN": "MIN", "REDUCE_PROD": "PROD"}


def _make_reduce(tfl_type, kind):
    @tfl_op(tfl_type)
    def mapper(ctx, op):
        reduce_axes(ctx, op, kind, bool(op.options.KeepDims()) if op.options is not None else False)
    mapper.__name__ = f"map_{tfl_type.lower()}"
    return mapper


for _t, _k in REDUCE.items():
    _make_reduce(_t, _k)


@tfl_op("ARG_MAX", "ARG_MIN")
def arg_max(ctx, op):
    x = ctx.inp(op, 0)
    axis = axis_list(ctx, op, 1, len(ctx.shape(x)))
    if len(axis) != 1:
        raise ctx.fail(op, "the dimension must be one axis")
    out_type = ctx.model.tensors[op.outputs[0]].dtype
    wide = ctx.temp(op, "int64")
    ctx.add("ArgMax", op, [x], [wide], name=wide, axis=axis[0], keepdims=0,
            argmin=int(op.type == "ARG_MIN"))
    ctx.add("Cast", op, [wide], to=np.dtype(out_type).name)


@tfl_op("CAST")
def cast(ctx, op):
    dtype = ctx.model.tensors[op.outputs[0]].dtype
    if dtype is None or dtype.kind not in "biuf":
        raise ctx.fail(op, f"cannot cast to {ctx.model.tensors[op.outputs[0]].type_name}")
    ctx.add("Cast", op, [ctx.inp(op, 0)], to=dtype.name)


@tfl_op("SELECT", "SELECT_V2")
def select(ctx, op):
    cond, x = ctx.inp(op, 0), ctx.inp(op, 1)
    # SELECT (v1) picks whole rows with a vector condition; only the element-wise form maps.
    if op.type == "SELECT" and ctx.shape(cond) != ctx.shape(x):
        raise ctx.fail(op, f"condition shape {list(ctx.shape(cond))} differs from {list(ctx.shape(x))}; "
                           f"only the element-wise form is supported (SELECT_V2 broadcasts)")
    ctx.add("Select", op, ctx.inputs(op))
