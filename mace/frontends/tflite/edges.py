"""Quantized model inputs and outputs (`inference_input_type = tf.int8 / tf.uint8`, the TFLite
converter's setting for microcontroller and DSP targets), as MACE's `input_data_types` /
`output_data_types` choose them.

The converted graph is float inside (each integer activation is the real it stands for, its scale
and zero point kept as its range), so the edges convert:

- input, `input_data_types` = the tensor's own type (int8, uint8, int16): the caller passes the
  integers; a Cast, `- zero_point`, `* scale` make the reals.
- input, `float32` (the default): the caller passes reals; they are rounded to the tensor's grid
  and saturated (a FakeQuantize, what LiteRT's caller does with the scale and zero point).
- output, the tensor's own type: the reals are mapped back, `round(x / scale) + zero_point`,
  saturated, cast: the integers LiteRT gives.
- output, `float32` (the default): the reals, `(q - zero_point) * scale`.

Any other type is an error naming the tensor, its type, scale and zero point.
"""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError
from mace.ir.qat_ranges import record_ranges
from mace.transform.shape_inference import infer_op


def zero_point(tensor) -> int:
    z = tensor.zero_point
    return int(z.reshape(-1)[0]) if z is not None and z.size else 0


def scale(tensor) -> float:
    return float(tensor.scale.reshape(-1)[0])


def is_quantized_edge(tensor) -> bool:
    return tensor.real_range() is not None


def check_edge_type(tensor, dtype: str, what: str, path) -> None:
    """`dtype` (the deployment file's) must be float32 or the quantized tensor's own type."""
    if dtype in ("float32", tensor.dtype.name):
        return
    raise ModelError(f"{path}: {what} tensor '{tensor.name}' is quantized {tensor.type_name} (scale "
                     f"{scale(tensor):.6g}, zero point {zero_point(tensor)}); {what}_data_types may be "
                     f"{tensor.dtype.name} (the integers) or float32 (the real values), not {dtype}")


def _op(graph, op_type, inputs, out, **args):
    op = graph.add_op(op_type, inputs, [out], name=out, **args)
    infer_op(graph, op)
    return out


def _const(graph, base, value):
    return graph.add_const(graph.unique_name(base), np.asarray(value, np.float32))


def input_to_reals(graph, name: str, tensor, dtype: str) -> str:
    """The float tensor the model's ops read for quantized input `name` (given as `dtype`)."""
    s, z = scale(tensor), zero_point(tensor)
    unique = graph.unique_name
    if dtype == "float32":
        info = np.iinfo(tensor.dtype)
        return _op(graph, "FakeQuantize", [name], unique(f"{name}_on_grid"), scale=s, zero_point=z,
                   quant_min=int(info.min), quant_max=int(info.max))
    wide = _op(graph, "Cast", [name], unique(f"{name}_float"), to="float32")
    shifted = _op(graph, "Eltwise", [wide, _const(graph, f"{name}_zero_point", z)],
                  unique(f"{name}_centred"), type="SUB")
    _integer_ranges(graph, tensor, [wide], [shifted])
    return _op(graph, "Eltwise", [shifted, _const(graph, f"{name}_scale", s)], unique(f"{name}_real"),
               type="PROD")


def _integer_ranges(graph, tensor, stored: list, centred: list) -> None:
    """Ranges of the edge's integer-valued float tensors, for a quantized run (quantize: 1): the
    stored integers [qmin, qmax] and those less the zero point; on a 256-level grid both are exact."""
    info, z = np.iinfo(tensor.dtype), zero_point(tensor)
    record_ranges(graph.net, [(t, info.min, info.max, info.bits, 0) for t in stored] +
                  [(t, info.min - z, info.max - z, info.bits, 0) for t in centred])


def reals_to_output(graph, source: str, tensor) -> str:
    """A tensor holding quantized output `tensor`'s integers, made from the reals in `source`."""
    s, z = scale(tensor), zero_point(tensor)
    info = np.iinfo(tensor.dtype)
    unique, base = graph.unique_name, tensor.name
    steps = _op(graph, "Eltwise", [source, _const(graph, f"{base}_scale", s)], unique(f"{base}_steps"),
                type="DIV")
    rounded = _op(graph, "Eltwise", [steps], unique(f"{base}_rounded"), type="ROUND")
    shifted = _op(graph, "Eltwise", [rounded, _const(graph, f"{base}_zero_point", z)],
                  unique(f"{base}_shifted"), type="SUM")
    held = _op(graph, "Activation", [shifted], unique(f"{base}_saturated"), activation="CLIP",
               activation_coefficient=float(info.min), max_limit=float(info.max))
    _integer_ranges(graph, tensor, [shifted, held], [steps, rounded])
    return _op(graph, "Cast", [held], unique(f"{base}_integers"), to=tensor.dtype.name)
