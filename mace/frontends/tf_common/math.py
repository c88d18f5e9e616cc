"""Math with TensorFlow's semantics (AddN, reductions, the axis lists of ArgMax), for the
TensorFlow and TFLite frontends (tf_common/__init__.py)."""
from mace.ops._common import normalize_axis


def add_n(ctx, node):
    inputs = ctx.inputs(node)
    if len(inputs) == 1:
        ctx.alias(node, 0, inputs[0])
    else:
        ctx.add("Eltwise", node, inputs, type="SUM")


def axis_list(ctx, node, i, rank):
    """Input i as sorted, distinct, non-negative axes of a rank-`rank` input."""
    try:
        return sorted({normalize_axis(a, rank) for a in ctx.static_ints(node, i, "the axes")})
    except ValueError as e:
        raise ctx.fail(node, str(e)) from None


def reduce_axes(ctx, node, kind, keepdims):
    """Reduce input 0 over input 1's axes; an empty axis list reduces nothing."""
    x = ctx.inp(node, 0)
    axes = axis_list(ctx, node, 1, len(ctx.shape(x)))
    ctx.add("Reduce", node, [x], reduce_type=kind, axis=axes, keepdims=int(keepdims), noop_with_empty_axes=1)
