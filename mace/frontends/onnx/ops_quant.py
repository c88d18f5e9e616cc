"""ONNX QuantizeLinear / DequantizeLinear (QDQ models) -> float graph + kept ranges.

A QDQ model (onnxruntime.quantization.quantize_static, QAT exporters) stores
weights as integers behind DequantizeLinear and marks every quantized activation
with a QuantizeLinear -> DequantizeLinear pair. MACE quantizes with its own scheme
(mace/ir/quant_params.py), so the converter turns the model back into float and
keeps what the pairs knew:

* DequantizeLinear of a constant (int8/uint8 weights, int32 bias; per-tensor or
  per-axis scales) folds to the float constant (x - zero_point) * scale, as
  onnxruntime computes it; QuantizeLinear of a constant folds likewise.
* On an activation, QuantizeLinear and DequantizeLinear compute what ONNX says, with
  float ops (divide, round, add, clip, cast; cast, subtract, multiply).
* A Q -> DQ pair on an activation x becomes FakeQuantize(x) (mace/ops/fake_quantize.py:
  the pair's rounding and saturation in float, as onnxruntime computes it), with its range
  scale * (qmin - zero_point) .. scale * (qmax - zero_point) recorded for the quantize
  pass (mace/ir/qat_ranges.py; uint8: qmin 0, qmax 255; int8: -128, 127). Quantizing, the
  pass lower_fake_quantize turns it into the clamp it implies (RELUX when the range starts
  at exactly 0: an exporter may have folded a Relu/Clip into the pair, onnxruntime removes
  them; else an Identity), which fuses into its producer. The QuantizeLinear's own ops are
  then read by nobody and removed (remove_dead_ops).

Per-axis pairs on activations, blocked quantization (block_size) and non-integer
types (float8, 4-bit) are refused with the node's name.
"""
import numpy as np

from mace.errors import ModelError
from mace.frontends.onnx.registry import onnx_op
from mace.ir.qat_ranges import record_ranges
from mace.ops.fake_quantize import real_range

DEFAULT_AXIS = 1


def _fail(node, ctx, message):
    return ModelError(f"{node.op_type} '{ctx.op_name(node)}': {message}")


def _pending(ctx) -> dict:
    """QuantizeLinear outputs on activations, for a DequantizeLinear reading one:
    name -> (float input, scale, zero point). Kept on the context, one per conversion."""
    return vars(ctx).setdefault("quantize_linear_pending", {})


def _params(ctx, node, data_dtype=None):
    """(scale, zero point) as arrays; the zero point's dtype is the integer type."""
    if int(ctx.attr(node, "block_size", 0) or 0):
        raise _fail(node, ctx, "blocked quantization (block_size) is not supported")
    scale = ctx.const(ctx.inp(node, 1))
    if scale is None:
        raise _fail(node, ctx, "the scale must be constant")
    zp_name = ctx.inp(node, 2)
    zp = ctx.const(zp_name)
    if zp_name is not None and zp is None:
        raise _fail(node, ctx, "the zero point must be constant")
    if zp is None:
        dtype = data_dtype
        if dtype is None:   # QuantizeLinear: uint8 unless opset 21's output_dtype says otherwise
            out = ctx.attr(node, "output_dtype", 0)
            dtype = np.uint8 if not out else _np_dtype(out)
        zp = np.zeros(np.shape(scale), dtype)
    zp = np.asarray(zp)
    if zp.dtype.kind not in "iu":
        raise _fail(node, ctx, f"quantized type {zp.dtype} is not supported (integer types only)")
    return np.asarray(scale), zp


def _np_dtype(onnx_type):
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))


def _along(value, axis: int, rank: int):
    """A per-tensor (size 1) or per-axis parameter shaped to broadcast against the data."""
    value = np.asarray(value)
    if value.size == 1:
        return value.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return value.reshape(shape)


def _axis(ctx, node, rank: int, size: int) -> int:
    axis = int(ctx.attr(node, "axis", DEFAULT_AXIS))
    if size == 1:
        return 0
    if not -rank <= axis < rank:
        raise _fail(node, ctx, f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _const_output(ctx, node, value):
    # An Identity from a new constant: folds at once unless the tensor is a model output.
    src = ctx.add_const(ctx.temp(node, "value"), value)
    ctx.add("Identity", node, [src], name=ctx.temp(node, "const"))


@onnx_op("QuantizeLinear")
def quantize_linear(ctx, node):
    x = ctx.inp(node, 0)
    scale, zp = _params(ctx, node)
    value = ctx.const(x)
    if value is None:
        _pending(ctx)[node.output[0]] = (x, scale, zp)
        _quantize_ops(ctx, node, x, scale, zp)
        return
    axis = _axis(ctx, node, value.ndim, scale.size)
    s, z = _along(scale, axis, value.ndim), _along(zp, axis, value.ndim)
    info = np.iinfo(zp.dtype)
    q = np.rint(np.asarray(value, np.float32) / s.astype(np.float32)) + z.astype(np.float64)
    _const_output(ctx, node, np.clip(q, info.min, info.max).astype(zp.dtype))


@onnx_op("DequantizeLinear")
def dequantize_linear(ctx, node):
    x = ctx.inp(node, 0)
    value = ctx.const(x)
    pending = _pending(ctx).get(node.input[0])
    scale, zp = _params(ctx, node, ctx.graph.dtype(x))
    if value is None and pending is None:
        _dequantize_ops(ctx, node, x, scale, zp)
        return
    if value is not None:
        axis = _axis(ctx, node, value.ndim, scale.size)
        s, z = _along(scale, axis, value.ndim), _along(zp, axis, value.ndim)
        # as onnxruntime: integer subtraction, then one float multiply
        real = (value.astype(np.int64) - z.astype(np.int64)).astype(scale.dtype) * s
        _const_output(ctx, node, real.astype(scale.dtype))
        return
    _pair(ctx, node, *pending, scale, zp)


def _pair(ctx, node, x, q_scale, q_zp, scale, zp):
    """Q -> DQ on activation x: FakeQuantize (x on the pair's grid), its range recorded."""
    if scale.size != 1 or q_scale.size != 1:
        raise _fail(node, ctx, "per-axis quantization of an activation is not supported "
                               "(one scale per tensor)")
    if (q_zp.dtype != zp.dtype
            or not np.array_equal(q_scale.reshape(-1), scale.reshape(-1))
            or not np.array_equal(q_zp.reshape(-1), zp.reshape(-1))):
        raise _fail(node, ctx, "its scale/zero point differ from those of the QuantizeLinear it "
                               "reads (a Q -> DQ pair must share them)")
    s = np.float32(scale.reshape(-1)[0])
    if not (np.isfinite(s) and s > 0):
        raise _fail(node, ctx, f"scale {s} must be a positive finite number")
    fake_quantize(ctx, node, x, s, zp.reshape(-1)[0], node.output[0])


def fake_quantize(ctx, node, x, s, zp, out):
    """out = FakeQuantize(x) on the grid (s, zp; zp's dtype the integer type), its range
    recorded on both. x carries the range too: quantizing, the op becomes x's clamp
    (lower_fake_quantize) and x keeps its name when that goes away or fuses into x's producer."""
    info = np.iinfo(zp.dtype)
    ctx.add("FakeQuantize", node, [x], [out], name=None if out == node.output[0] else out,
            scale=float(s), zero_point=int(zp), quant_min=int(info.min), quant_max=int(info.max))
    lo, hi = real_range(s, int(zp), info.min, info.max)
    record_ranges(ctx.graph.net, [(out, lo, hi, info.bits, 0), (x, lo, hi, info.bits, 0)])


def _param_consts(ctx, node, x, scale, zp):
    """scale and zero point as float constants broadcasting against activation x."""
    rank = len(ctx.shape(x))
    axis = _axis(ctx, node, rank, scale.size)
    s = ctx.add_const(ctx.temp(node, "scale"), _along(scale, axis, rank).astype(np.float32))
    z = ctx.add_const(ctx.temp(node, "zero_point"), _along(zp, axis, rank).astype(np.float32))
    return s, z


def _quantize_ops(ctx, node, x, scale, zp):
    """y = saturate(round_half_even(x / scale) + zero_point), cast to the zero point's type."""
    info = np.iinfo(zp.dtype)
    s, z = _param_consts(ctx, node, x, scale, zp)
    t = [ctx.temp(node, k) for k in ("scaled", "rounded", "shifted", "saturated")]
    ctx.add("Eltwise", node, [x, s], [t[0]], name=t[0], type="DIV")
    ctx.add("Eltwise", node, [t[0]], [t[1]], name=t[1], type="ROUND")
    ctx.add("Eltwise", node, [t[1], z], [t[2]], name=t[2], type="SUM")
    ctx.add("Activation", node, [t[2]], [t[3]], name=t[3], activation="CLIP",
            activation_coefficient=float(info.min), max_limit=float(info.max))
    ctx.add("Cast", node, [t[3]], to=zp.dtype.name)


def _dequantize_ops(ctx, node, x, scale, zp, out=None):
    """y = (float(x) - zero_point) * scale, into `out` (default: the node's output)."""
    s, z = _param_consts(ctx, node, x, scale, zp)
    t = [ctx.temp(node, k) for k in ("float", "centered")]
    ctx.add("Cast", node, [x], [t[0]], name=t[0], to="float32")
    ctx.add("Eltwise", node, [t[0], z], [t[1]], name=t[1], type="SUB")
    ctx.add("Eltwise", node, [t[1], s], None if out is None else [out],
            name=None if out is None else out, type="PROD")


@onnx_op("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx, node):
    outputs = [o or ctx.temp(node, f"unused{i}") for i, o in enumerate(node.output)]
    ctx.add("DynamicQuantize", node, [ctx.inp(node, 0)], outputs)


@onnx_op("MatMulInteger")
def matmul_integer(ctx, node):
    a_zero, b_zero = ctx.inp(node, 2), ctx.inp(node, 3)
    inputs = [ctx.inp(node, 0), ctx.inp(node, 1)] + [z for z in (a_zero, b_zero) if z is not None]
    ctx.add("MatMulInteger", node, inputs, has_a_zero=int(a_zero is not None),
            has_b_zero=int(b_zero is not None))
