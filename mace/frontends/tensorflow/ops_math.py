"""Element-wise math (-> Eltwise, numpy broadcasting is TensorFlow's), AddN, DivNoNan, Select,
reductions (Mean, Sum, Max, Min, Prod -> Reduce), ArgMax/ArgMin, Cast."""
import numpy as np

from mace.frontends.tensorflow.registry import tf_op
from mace.frontends.tf_common.math import add_n, axis_list, reduce_axes

ELTWISE = {
    "Add": "SUM", "AddV2": "SUM", "Sub": "SUB", "Mul": "PROD", "RealDiv": "DIV", "Maximum": "MAX",
    "Minimum": "MIN", "SquaredDifference": "SQR_DIFF", "Pow": "POW", "FloorDiv": "FLOOR_DIV",
    "FloorMod": "MOD", "Equal": "EQUAL", "NotEqual": "NOT_EQUAL", "Greater": "GREATER",
    "GreaterEqual": "GREATER_EQUAL", "Less": "LESS", "LessEqual": "LESS_EQUAL",
    "LogicalAnd": "AND", "LogicalOr": "OR",
    "Rsqrt": "RSQRT", "Sqrt": "SQRT", "Square": "SQUARE", "Neg": "NEG", "Abs": "ABS", "Exp": "EXP",
    "Log": "LOG", "Reciprocal": "RECIPROCAL", "Inv": "RECIPROCAL", "Floor": "FLOOR", "Ceil": "CEIL",
    "Round": "ROUND", "Sign": "SIGN", "LogicalNot": "NOT", "Sin": "SIN", "Cos": "COS", "Erf": "ERF",
}


def _make(tf_type, kind):
    @tf_op(tf_type)
    def mapper(ctx, node):
        ctx.add("Eltwise", node, ctx.inputs(node), type=kind)
    mapper.__name__ = f"map_{tf_type}"
    return mapper


for _t, _k in ELTWISE.items():
    _make(_t, _k)


tf_op("AddN")(add_n)


@tf_op("DivNoNan")
def div_no_nan(ctx, node):
    """x / y, and 0 where y is 0 (Keras normalisation layers divide by a range that may be
    empty): Select(y == 0, 0, x / Select(y == 0, 1, y)), so no division by zero is made."""
    x, y = ctx.inputs(node)
    dtype = ctx.dtype(x)
    zero = ctx.add_const(ctx.temp(node, "zero"), np.zeros((), dtype))
    one = ctx.add_const(ctx.temp(node, "one"), np.ones((), dtype))
    is_zero, safe_y = ctx.temp(node, "y_is_zero"), ctx.temp(node, "safe_y")
    quotient = ctx.temp(node, "quotient")
    ctx.add("Eltwise", node, [y, zero], [is_zero], name=is_zero, type="EQUAL")
    ctx.add("Select", node, [is_zero, one, y], [safe_y], name=safe_y)
    ctx.add("Eltwise", node, [x, safe_y], [quotient], name=quotient, type="DIV")
    ctx.add("Select", node, [is_zero, zero, quotient])


@tf_op("SelectV2")
def select_v2(ctx, node):
    ctx.add("Select", node, ctx.inputs(node))


@tf_op("Select")
def select(ctx, node):
    cond, x = ctx.inp(node, 0), ctx.inp(node, 1)
    # Select (v1) picks whole rows with a vector condition; only the element-wise form maps.
    if ctx.shape(cond) != ctx.shape(x):
        raise ctx.fail(node, f"condition shape {list(ctx.shape(cond))} differs from {list(ctx.shape(x))}; "
                             f"only the element-wise form is supported (SelectV2 broadcasts)")
    ctx.add("Select", node, ctx.inputs(node))


REDUCE = {"Mean": "MEAN", "Sum": "SUM", "Max": "MAX", "Min": "MIN", "Prod": "PROD"}


def _make_reduce(tf_type, kind):
    @tf_op(tf_type)
    def mapper(ctx, node):
        reduce_axes(ctx, node, kind, bool(ctx.attr(node, "keep_dims", False)))
    mapper.__name__ = f"map_{tf_type}"
    return mapper


for _t, _k in REDUCE.items():
    _make_reduce(_t, _k)


@tf_op("ArgMax", "ArgMin")
def arg_max(ctx, node):
    x = ctx.inp(node, 0)
    axis = axis_list(ctx, node, 1, len(ctx.shape(x)))
    if len(axis) != 1:
        raise ctx.fail(node, "the dimension must be one axis")
    out_type = np.dtype(ctx.attr(node, "output_type", np.int64))
    out = ctx.out(node) if out_type == np.int64 else ctx.temp(node, "int64")
    ctx.add("ArgMax", node, [x], [out], name=node.name if out == ctx.out(node) else out,
            axis=axis[0], keepdims=0, argmin=int(node.op == "ArgMin"))
    if out != ctx.out(node):
        ctx.add("Cast", node, [out], to=out_type.name)


@tf_op("Cast")
def cast(ctx, node):
    dtype = np.dtype(ctx.attr(node, "DstT"))
    if dtype.kind not in "biuf":
        raise ctx.fail(node, f"cannot cast to {dtype}")
    ctx.add("Cast", node, [ctx.inp(node, 0)], to=dtype.name)
