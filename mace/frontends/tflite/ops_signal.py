"""TFLite's signal ops, as tf.signal.stft / rfft / rfft2d and their magnitudes export them:
RFFT2D, COMPLEX_ABS, REAL, IMAG, the custom op IRFFT2D; and REVERSE_V2, RANGE.

Complex tensors (COMPLEX64) are carried as float32 with a trailing axis of 2 (real, imaginary),
the value axis of the IR's DFT (ONNX's layout), so every complex op is a chain of IR ops that
every runtime already has: RFFT2D is a one-sided DFT over the last axis then a full DFT over
the one before; IRFFT2D the inverse pair; COMPLEX_ABS sqrt(sum of squares over the pair);
REAL/IMAG take one of the two. RESHAPE, SQUEEZE and EXPAND_DIMS move complex tensors (to the
TFLite tensor's shape, the pair axis kept), and CAST to a real type keeps the real part. Any other op on a complex tensor, and a complex model
input or output, is refused before converting (`complex_refusals`), naming the op and tensor.
tf.signal.rfft (a 1-D transform) is exported by TensorFlow as RESHAPE -> RFFT2D -> RESHAPE, so it
needs nothing more.
"""
import numpy as np

from mace.frontends.slicing import reshape_to
from mace.frontends.tflite.registry import tfl_op
from mace.ops._common import normalize_axis
from mace.ops.reshape import resolve_shape

COMPLEX_PLUMBING = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}    # complex in, complex out, values kept
COMPLEX_OPS = {"RFFT2D", "COMPLEX_ABS", "REAL", "IMAG", "IRFFT2D", "CAST"} | COMPLEX_PLUMBING


def is_complex(tensor) -> bool:
    return tensor is not None and tensor.type_name.startswith("COMPLEX")


def touches_complex(model, op) -> bool:
    return any(is_complex(model.tensors[i]) for i in [*op.inputs, *op.outputs] if i >= 0)


def complex_refusals(model, order: list, edges: list) -> list:
    """'what: why' for each op on complex tensors that we cannot carry, and each complex model
    input or output in `edges` (TflTensors)."""
    bad = [f"{op.key} '{model.op_name(op)}' on complex tensor(s) "
           f"{[model.tensors[i].name for i in [*op.inputs, *op.outputs] if i >= 0 and is_complex(model.tensors[i])]}"
           for op in order if op.key not in COMPLEX_OPS and touches_complex(model, op)]
    bad += [f"model input/output '{t.name}' is {t.type_name} (name the COMPLEX_ABS, REAL or IMAG "
            f"tensor after it)" for t in edges if is_complex(t)]
    return bad


def complex_mapper(op_type: str):
    """The mapping of a builtin that meets a complex tensor, where it differs from the usual one."""
    return complex_reshape if op_type in COMPLEX_PLUMBING else complex_cast if op_type == "CAST" else None


def complex_cast(ctx, op):
    """CAST of a complex tensor to a real type keeps the real part (TensorFlow's and LiteRT's
    cast; BirdNET's spectrogram layer casts its STFT so). Casting a real tensor to complex is refused."""
    source, target = ctx.tensor(op, 0), ctx.model.tensors[op.outputs[0]]
    if not is_complex(source):
        raise ctx.fail(op, f"casting to {target.type_name} is not supported (complex values enter only "
                           f"through RFFT2D)")
    if is_complex(target):
        ctx.alias(op, 0, ctx.inp(op, 0))
        return
    if target.dtype is None or target.dtype.kind not in "biuf":
        raise ctx.fail(op, f"cannot cast to {target.type_name}")
    x = ctx.inp(op, 0)
    real = ctx.temp(op, "real")
    part = ctx.add_const(ctx.temp(op, "part"), np.array(0, np.int32))
    ctx.add("Gather", op, [x, part], [real], name=real, axis=len(ctx.shape(x)) - 1)
    ctx.add("Cast", op, [real], to=target.dtype.name)


def complex_reshape(ctx, op):
    """RESHAPE / SQUEEZE / EXPAND_DIMS of a complex tensor: the op's own shape rule on the values'
    shape (the pair axis left out), then the pair axis back on."""
    x = ctx.inp(op, 0)
    shape = list(ctx.shape(x))[:-1]
    try:
        dims = _reshaped(ctx, op, shape)
    except ValueError as e:
        raise ctx.fail(op, f"complex input {shape}: {e}") from None
    reshape_to(ctx, op, x, list(dims) + [2])


def _reshaped(ctx, op, shape: list) -> list:
    if op.type == "SQUEEZE":
        given = [int(d) for d in op.options.SqueezeDimsAsNumpy()] \
            if op.options is not None and op.options.SqueezeDimsLength() else []
        axes = {normalize_axis(a, len(shape)) for a in given} or {i for i, d in enumerate(shape) if d == 1}
        if any(shape[a] != 1 for a in axes):
            raise ValueError(f"cannot squeeze axes {sorted(axes)}")
        return [d for i, d in enumerate(shape) if i not in axes]
    if op.type == "EXPAND_DIMS":
        axis = ctx.static_ints(op, 1, "axis")
        if len(axis) != 1:
            raise ValueError(f"axis {axis} must be one axis")
        return shape[:normalize_axis(axis[0], len(shape) + 1)] + [1] + shape[normalize_axis(axis[0], len(shape) + 1):]
    if ctx.inp(op, 1) is not None and ctx.const(ctx.inp(op, 1)) is not None:
        dims = ctx.static_ints(op, 1, "the target shape")
    elif op.options is not None and op.options.NewShapeLength():
        dims = [int(d) for d in op.options.NewShapeAsNumpy()]
    else:
        dims = list(ctx.model.tensors[op.outputs[0]].shape)
    return list(resolve_shape(shape, dims, allowzero=True))


def _fft_lengths(ctx, op, shape):
    lengths = ctx.static_ints(op, 1, "fft_length")
    if len(lengths) != 2 or min(lengths) <= 0 or len(shape) < 2:
        raise ctx.fail(op, f"fft_length {lengths} on input {list(shape)}: expected two positive "
                           f"lengths and an input of rank >= 2")
    return lengths


@tfl_op("RFFT2D")
def rfft2d(ctx, op):
    x = ctx.inp(op, 0)
    shape = list(ctx.shape(x))
    fh, fw = _fft_lengths(ctx, op, shape)
    real, rows = ctx.temp(op, "real"), ctx.temp(op, "rows")
    reshape_to(ctx, op, x, shape + [1], real)
    rank = len(shape) + 1
    ctx.add("DFT", op, [real], [rows], name=rows, axis=rank - 2, length=fw, onesided=1)
    ctx.add("DFT", op, [rows], axis=rank - 3, length=fh)


@tfl_op("IRFFT2D")
def irfft2d(ctx, op):
    """The custom op TensorFlow writes for tf.signal.irfft2d (with allow_custom_ops): the inverse
    over the second-last axis, then the one-sided inverse over the last; 1/(fh*fw) scaled."""
    x = ctx.inp(op, 0)
    shape = list(ctx.shape(x))[:-1]
    fh, fw = _fft_lengths(ctx, op, shape)
    rank = len(shape) + 1
    cols, real = ctx.temp(op, "cols"), ctx.temp(op, "real")
    ctx.add("DFT", op, [x], [cols], name=cols, axis=rank - 3, length=fh, inverse=1)
    ctx.add("DFT", op, [cols], [real], name=real, axis=rank - 2, length=fw, inverse=1, onesided=1)
    reshape_to(ctx, op, real, shape[:-2] + [fh, fw])


@tfl_op("COMPLEX_ABS")
def complex_abs(ctx, op):
    x = ctx.inp(op, 0)
    squares, total = ctx.temp(op, "squares"), ctx.temp(op, "sum")
    ctx.add("Eltwise", op, [x], [squares], name=squares, type="SQUARE")
    ctx.add("Reduce", op, [squares], [total], name=total, reduce_type="SUM",
            axis=[len(ctx.shape(x)) - 1], keepdims=0)
    ctx.add("Eltwise", op, [total], type="SQRT")


@tfl_op("REAL", "IMAG")
def real_imag(ctx, op):
    x = ctx.inp(op, 0)
    part = ctx.add_const(ctx.temp(op, "part"), np.array(int(op.type == "IMAG"), np.int32))
    ctx.add("Gather", op, [x, part], axis=len(ctx.shape(x)) - 1)


@tfl_op("REVERSE_V2")
def reverse_v2(ctx, op):
    x = ctx.inp(op, 0)
    shape = ctx.shape(x)
    given = ctx.static_ints(op, 1, "axis")
    if any(not -len(shape) <= a < len(shape) for a in given):
        raise ctx.fail(op, f"axis {given} out of range for rank {len(shape)}")
    axes = sorted({a % len(shape) for a in given})
    if not axes:
        ctx.alias(op, 0, x)
        return
    ctx.add("StridedSlice", op, [x], starts=[-1] * len(axes), ends=[-shape[a] - 1 for a in axes],
            axes=axes, steps=[-1] * len(axes))


@tfl_op("RANGE")
def range_(ctx, op):
    """start, limit, delta: constant once shapes are static (SHAPE folds), so it folds too."""
    ctx.add("Range", op, ctx.inputs(op))
