"""ONNX MatMul, Einsum, Gather, Slice, Split, Expand, Tile, Where, Cast, CastLike, Range.

Shape-like operands (Slice starts/ends, Split sizes, Expand shape, Tile
repeats) must be static: constants, or sub-graphs of constants and input
shapes, which fold while converting. They become op args.
"""
import math

import numpy as np

from mace.errors import ModelError
from mace.frontends.onnx.registry import onnx_op
from mace.ir.dtypes import from_numpy
from mace.ops._common import broadcast_shape, normalize_axis
from mace.ops.einsum import einsum_shape


def static_ints(ctx, node, i, what):
    """Input i of `node` as a list of ints; it must be known while converting."""
    v = ctx.const(ctx.inp(node, i))
    if v is None:
        raise ModelError(f"{node.op_type} '{ctx.op_name(node)}': {what} must be static "
                         f"(computable from constants and input shapes)")
    return [int(d) for d in np.asarray(v).reshape(-1)]


def node_axis(ctx, node, axis, rank):
    try:
        return normalize_axis(int(axis), rank)
    except ValueError as e:
        raise ModelError(f"{node.op_type} '{ctx.op_name(node)}': {e}") from None


@onnx_op("MatMul")
def matmul(ctx, node):
    a, b = ctx.inp(node, 0), ctx.inp(node, 1)
    bw = ctx.const(b)
    # A constant float matrix on the right is a FullyConnected: its kernel packs the
    # weight once and runs one GEMM over all leading axes of `a`.
    if (bw is not None and bw.ndim == 2 and len(ctx.shape(a)) >= 2
            and ctx.graph.dtype(a) == np.float32 and bw.dtype == np.float32):
        weight = ctx.add_const(ctx.temp(node, "weight"), np.ascontiguousarray(bw.T))  # (O, K)
        ctx.add("FullyConnected", node, [a, weight])
        return
    ctx.add("MatMul", node, [a, b])


@onnx_op("Einsum")
def einsum(ctx, node):

    equation = ctx.attr(node, "equation", b"")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    inputs = ctx.inputs(node)
    try:  # a malformed equation is the model's fault: say so at convert, naming the node
        einsum_shape(equation, [ctx.shape(t) for t in inputs])
    except ValueError as e:
        raise ModelError(f"Einsum '{ctx.op_name(node)}': {e}") from None
    ctx.add("Einsum", node, inputs, equation=equation.replace(" ", ""))


@onnx_op("Gather")
def gather(ctx, node):
    data, indices = ctx.inp(node, 0), ctx.inp(node, 1)
    axis = node_axis(ctx, node, ctx.attr(node, "axis", 0), len(ctx.shape(data)))
    ctx.add("Gather", node, [data, indices], axis=axis)


def _slice_params(ctx, node, rank):
    if ctx.opset < 10:
        starts, ends = list(ctx.attr(node, "starts")), list(ctx.attr(node, "ends"))
        axes, steps = ctx.attr(node, "axes"), None
    else:
        starts = static_ints(ctx, node, 1, "starts")
        ends = static_ints(ctx, node, 2, "ends")
        axes = static_ints(ctx, node, 3, "axes") if ctx.inp(node, 3) else None
        steps = static_ints(ctx, node, 4, "steps") if ctx.inp(node, 4) else None
    axes = list(range(len(starts))) if axes is None else [node_axis(ctx, node, a, rank) for a in axes]
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ModelError(f"Slice '{ctx.op_name(node)}': starts, ends, axes and steps differ in length")
    if 0 in steps:
        raise ModelError(f"Slice '{ctx.op_name(node)}': a step is 0")
    return starts, ends, axes, steps


_INT_MAX = (2 ** 31 - 1, 2 ** 63 - 1)


@onnx_op("Slice")
def slice_(ctx, node):
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    starts, ends, axes, steps = _slice_params(ctx, node, len(shape))
    dims = [shape[a] for a in axes]
    # onnxruntime reads an end of INT32_MAX / INT64_MAX as "up to the edge in the step's
    # direction" (numpy's None), also for negative steps; follow it.
    ends = [(d if st > 0 else -d - 1) if int(e) in _INT_MAX else int(e)
            for e, d, st in zip(ends, dims, steps)]
    # Clamping to [-dim, dim] (ends: [-dim-1, dim]) keeps the meaning and keeps huge
    # "to the end" markers out of the args.
    starts = [min(max(int(s), -d), d) for s, d in zip(starts, dims)]
    ends = [min(max(e, -d - 1), d) for e, d in zip(ends, dims)]
    ctx.add("StridedSlice", node, [x], starts=starts, ends=ends, axes=axes,
            steps=[int(s) for s in steps])


def _split_sizes(ctx, node, dim):
    n_out = len(node.output)
    if ctx.opset >= 13:
        sizes = static_ints(ctx, node, 1, "split") if ctx.inp(node, 1) else None
    else:
        sizes = ctx.attr(node, "split")
    if sizes is not None:
        return [int(s) for s in sizes]
    num = ctx.attr(node, "num_outputs")
    if num is not None:  # opset 18: equal chunks, the last one smaller
        chunk = math.ceil(dim / num)
        return [chunk] * (num - 1) + [dim - chunk * (num - 1)]
    if dim % n_out:
        raise ModelError(f"Split '{ctx.op_name(node)}': axis of size {dim} does not split "
                         f"evenly into {n_out} outputs")
    return [dim // n_out] * n_out


@onnx_op("Split")
def split(ctx, node):
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    axis = node_axis(ctx, node, ctx.attr(node, "axis", 0), len(shape))
    sizes = _split_sizes(ctx, node, shape[axis])
    if len(sizes) != len(node.output) or sum(sizes) != shape[axis] or min(sizes) < 0:
        raise ModelError(f"Split '{ctx.op_name(node)}': sizes {sizes} do not cut axis {axis} "
                         f"(size {shape[axis]}) into {len(node.output)} outputs")
    outputs = [o or ctx.temp(node, f"unused{i}") for i, o in enumerate(node.output)]
    ctx.add("Split", node, [x], outputs, axis=axis, split=sizes)


@onnx_op("Expand")
def expand(ctx, node):
    x = ctx.inp(node, 0)
    want = static_ints(ctx, node, 1, "the shape")
    try:
        out = broadcast_shape(ctx.shape(x), want)
    except ValueError:
        raise ModelError(f"Expand '{ctx.op_name(node)}': cannot broadcast {ctx.shape(x)} "
                         f"to {want}") from None
    ctx.add("Expand", node, [x], shape=[int(d) for d in out])


@onnx_op("Tile")
def tile(ctx, node):
    ctx.add("Tile", node, [ctx.inp(node, 0)], repeats=static_ints(ctx, node, 1, "repeats"))


@onnx_op("Where")
def where(ctx, node):
    ctx.add("Select", node, [ctx.inp(node, i) for i in range(3)])


def _has_ir_type(dtype) -> bool:
    """float64 folds at convert (see below); float8/float4/int4 and the like have no IR type
    (numpy's kind calls float8_e5m2 a float, so the kind alone does not rule them out)."""
    if np.dtype(dtype) == np.float64:
        return True
    try:
        from_numpy(dtype)
    except ValueError:
        return False
    return True


def _ir_dtype_name(dtype):
    # float64 stays float64 here, so casts on constants and shapes fold exactly; a float64
    # tensor left for run time is refused when the conversion ends (frontend._check_float64).
    return np.dtype(dtype).name


@onnx_op("Cast", "CastLike")
def cast(ctx, node):
    import onnx

    if node.op_type == "Cast":
        try:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(int(ctx.attr(node, "to")))
        except (KeyError, TypeError, ValueError):
            raise ModelError(f"Cast '{ctx.op_name(node)}': unsupported target type "
                             f"{ctx.attr(node, 'to')}") from None
    else:
        dtype = ctx.graph.dtype(ctx.inp(node, 1))
    if np.dtype(dtype).kind not in "biuf" or not _has_ir_type(dtype):
        raise ModelError(f"{node.op_type} '{ctx.op_name(node)}': cannot cast to {np.dtype(dtype)}")
    ctx.add("Cast", node, [ctx.inp(node, 0)], to=_ir_dtype_name(dtype))


@onnx_op("Range")
def range_(ctx, node):
    ctx.add("Range", node, [ctx.inp(node, i) for i in range(3)])
