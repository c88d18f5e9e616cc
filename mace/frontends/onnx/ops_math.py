"""ONNX element-wise math -> Eltwise (numpy broadcasting covers ONNX's multidirectional rules)."""
from mace.errors import ModelError
from mace.frontends.onnx.registry import onnx_op

ELTWISE = {
    "Add": "SUM", "Sub": "SUB", "Mul": "PROD", "Div": "DIV", "Pow": "POW",
    "Max": "MAX", "Min": "MIN", "Sum": "SUM", "Mean": "MEAN",
    "Equal": "EQUAL", "Greater": "GREATER", "GreaterOrEqual": "GREATER_EQUAL",
    "Less": "LESS", "LessOrEqual": "LESS_EQUAL", "And": "AND", "Or": "OR", "Xor": "XOR",
    "Neg": "NEG", "Abs": "ABS", "Sqrt": "SQRT", "Exp": "EXP", "Log": "LOG", "Erf": "ERF",
    "Reciprocal": "RECIPROCAL", "Floor": "FLOOR", "Ceil": "CEIL", "Round": "ROUND",
    "Sign": "SIGN", "Not": "NOT", "Sin": "SIN", "Cos": "COS", "Tan": "TAN", "Asin": "ASIN",
    "Acos": "ACOS", "Atan": "ATAN", "Sinh": "SINH", "Cosh": "COSH", "Asinh": "ASINH",
    "Acosh": "ACOSH", "Atanh": "ATANH", "IsNaN": "ISNAN",
}


def _make(onnx_type, kind):
    @onnx_op(onnx_type)
    def mapper(ctx, node):
        inputs = ctx.inputs(node)
        if len(inputs) == 1 and kind in ("SUM", "MAX", "MIN", "MEAN"):
            ctx.add("Identity", node, inputs)  # n-ary op of one input
            return
        ctx.add("Eltwise", node, inputs, type=kind)
    mapper.__name__ = f"map_{onnx_type}"
    return mapper


for _onnx_type, _kind in ELTWISE.items():
    _make(_onnx_type, _kind)


@onnx_op("Mod")
def mod(ctx, node):
    ctx.add("Eltwise", node, ctx.inputs(node), type="MOD", fmod=int(ctx.attr(node, "fmod", 0)))


@onnx_op("IsInf")
def is_inf(ctx, node):
    pos, neg = int(ctx.attr(node, "detect_positive", 1)), int(ctx.attr(node, "detect_negative", 1))
    if not (pos or neg):
        raise ModelError(f"IsInf '{ctx.op_name(node)}': detect_positive and detect_negative are both 0 "
                         f"(the output would be all false): attribute or layout not supported")
    kind = "ISINF" if pos and neg else "ISPOSINF" if pos else "ISNEGINF"
    ctx.add("Eltwise", node, ctx.inputs(node), type=kind)
