"""ONNX tensor plumbing with static shapes: Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Concat, Identity, Dropout, Constant, ConstantOfShape, Shape, Size."""
import numpy as np
import onnx.numpy_helper as nh

from mace.errors import ModelError
from mace.frontends.onnx.registry import onnx_op
from mace.ops.reshape import resolve_shape


def _static(ctx, node, i, what):
    v = ctx.const(ctx.inp(node, i))
    if v is None:
        raise ModelError(f"{node.op_type} '{ctx.op_name(node)}': {what} must be static "
                         f"(computable from constants and input shapes)")
    return [int(d) for d in np.asarray(v).reshape(-1)]


def _const_output(ctx, node, i, value):
    """Output i of `node` as a constant, through an Identity that folds away at once
    unless the tensor is a model output (which must be written by an op)."""
    src = ctx.add_const(ctx.temp(node, "value"), value)
    ctx.add("Identity", node, [src], outputs=[node.output[i]], name=ctx.temp(node, "const"))


def _reshape_to(ctx, node, dims, allowzero=0):
    # allowzero travels with the dims: a 0 left in them is a real zero-size axis.
    ctx.add("Reshape", node, [ctx.inp(node, 0)], dims=[int(d) for d in dims],
            allowzero=int(allowzero) or None)


@onnx_op("Reshape")
def reshape(ctx, node):
    dims = _static(ctx, node, 1, "the target shape")
    x = ctx.inp(node, 0)
    allowzero = int(ctx.attr(node, "allowzero", 0))
    _reshape_to(ctx, node, resolve_shape(ctx.shape(x), dims, allowzero), allowzero)


@onnx_op("Flatten")
def flatten(ctx, node):
    shape = ctx.shape(ctx.inp(node, 0))
    axis = int(ctx.attr(node, "axis", 1))
    axis = axis + len(shape) if axis < 0 else axis  # -1 is the last axis, not len(shape)
    _reshape_to(ctx, node, [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))])


def _axes(ctx, node):
    if ctx.opset >= 13 and len(node.input) > 1:
        return _static(ctx, node, 1, "axes") if node.input[1] else None
    axes = ctx.attr(node, "axes")
    return None if axes is None else list(axes)


@onnx_op("Squeeze")
def squeeze(ctx, node):
    shape = ctx.shape(ctx.inp(node, 0))
    axes = _axes(ctx, node)
    axes = [i for i, d in enumerate(shape) if d == 1] if axes is None else \
        [a % len(shape) for a in axes]
    _reshape_to(ctx, node, [d for i, d in enumerate(shape) if i not in axes])


@onnx_op("Unsqueeze")
def unsqueeze(ctx, node):
    shape = list(ctx.shape(ctx.inp(node, 0)))
    axes = _axes(ctx, node)
    rank = len(shape) + len(axes)
    for a in sorted(x % rank for x in axes):
        shape.insert(a, 1)
    _reshape_to(ctx, node, shape)


@onnx_op("Transpose")
def transpose(ctx, node):
    x = ctx.inp(node, 0)
    perm = ctx.attr(node, "perm")
    perm = list(perm) if perm is not None else list(range(len(ctx.shape(x))))[::-1]
    ctx.add("Transpose", node, [x], dims=perm)


@onnx_op("Concat")
def concat(ctx, node):
    ctx.add("Concat", node, ctx.inputs(node), axis=int(ctx.attr(node, "axis")))


@onnx_op("Identity", "Dropout")
def identity(ctx, node):
    if node.op_type == "Dropout":
        _check_inference_dropout(ctx, node)
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        # Inference keeps every element: the mask is all true.
        _const_output(ctx, node, 1, np.ones(ctx.shape(ctx.inp(node, 0)), np.bool_))
    ctx.add("Identity", node, [ctx.inp(node, 0)], outputs=[node.output[0]])


def _check_inference_dropout(ctx, node):
    """Dropout is the identity at inference; a training-mode Dropout is refused."""
    training = ctx.inp(node, 2)
    if training is None:
        return
    flag = ctx.const(training)
    if flag is None:
        raise ModelError(f"Dropout '{ctx.op_name(node)}': training_mode must be static (constant false)")
    if bool(np.asarray(flag).reshape(-1)[0]):
        raise ModelError(f"Dropout '{ctx.op_name(node)}': training mode is not supported (inference only)")


@onnx_op("Constant")
def constant(ctx, node):
    for a in node.attribute:
        if a.name == "value":
            value = nh.to_array(a.t)
        elif a.name in ("value_float", "value_int"):
            value = np.array(a.f if a.name == "value_float" else a.i,
                             np.float32 if a.name == "value_float" else np.int64)
        elif a.name in ("value_floats", "value_ints"):
            value = np.array(list(a.floats) if a.name == "value_floats" else list(a.ints),
                             np.float32 if a.name == "value_floats" else np.int64)
        else:
            raise ModelError(f"Constant '{ctx.op_name(node)}': attribute '{a.name}' is not supported")
        _const_output(ctx, node, 0, value)
        return
    raise ModelError(f"Constant '{ctx.op_name(node)}' has no value")


@onnx_op("ConstantOfShape")
def constant_of_shape(ctx, node):
    shape = _static(ctx, node, 0, "the shape")
    fill = ctx.attr(node, "value")
    value = nh.to_array(fill).reshape(-1)[0] if fill is not None else np.float32(0)
    _const_output(ctx, node, 0, np.full(shape, value, dtype=np.asarray(value).dtype))


@onnx_op("Shape")
def shape(ctx, node):
    args = {}
    if ctx.attr(node, "start") is not None:
        args["start"] = int(ctx.attr(node, "start"))
    if ctx.attr(node, "end") is not None:
        args["end"] = int(ctx.attr(node, "end"))
    ctx.add("Shape", node, [ctx.inp(node, 0)], **args)


@onnx_op("Size")
def size(ctx, node):
    # the element count is static once the deployment file fixes the input shapes
    x = ctx.inp(node, 0)
    value = ctx.const(x)
    shape = np.shape(value) if value is not None else ctx.shape(x)
    _const_output(ctx, node, 0, np.array(int(np.prod(shape)), np.int64))
