"""What a loaded NetDef must satisfy before anything is allocated from it.

A `.pb` read back may be damaged (a bit flip, a truncated copy) or hand-made.
Protobuf parsing accepts any field values, so these checks stand between the
file and the engine: every dim non-negative and bounded, every data type one we
map to numpy, every constant's bytes inside the `.data` file and of the size its
dims and type say, every op's inputs made by some op, one shape and
type per output, and every quantized tensor's scale a finite, positive, normal float32
(the int8 kernels derive integer multipliers from scale ratios: NaN, 0 or infinity has
none) and its zero point inside its type. Each failure names the file, tensor or op.
"""
from __future__ import annotations

import math

import numpy as np

from mace.errors import ModelError
from mace.ir.dtypes import to_numpy
from mace.proto import pb

MAX_DIM = 2**31 - 1            # MACE's index type; a flipped high bit lands far above it
MAX_ELEMENTS = 2**40           # one tensor: 4 TiB of float32 is never a real model
# quantization steps: finite, positive, normal float32s (a tensor holding float32's lowest,
# an attention mask's fill, gets a step of 1.3e36; ours are >= 1e-6 / 255)
MIN_SCALE, MAX_SCALE = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
ZERO_RANGE = {pb.DT_UINT8: (0, 255), pb.DT_INT8: (-128, 127)}


def check_net(net, data_bytes: int, where) -> None:
    """Raise ModelError naming `where` (the .pb) and the part of `net` that cannot be right."""
    if net.data_size != data_bytes:
        raise ModelError(f"{where}: expects {net.data_size} bytes of model data, the data has "
                         f"{data_bytes} (the .pb and .data files do not belong together)")
    known = set()
    for t in net.tensors:
        _check_const(t, data_bytes, where)
        known.add(t.name)
    for info in net.input_info:
        _check_shape(info.dims, f"input '{info.name}'", where)
        _dtype(info.data_type, f"input '{info.name}'", where)
        known.add(info.name)
    known.update(t for op in net.op for t in op.output)   # nets need not be in run order
    for op in net.op:
        what = f"op '{op.name}' ({op.type})"
        missing = [t for t in op.input if t and t not in known]
        if missing:
            raise ModelError(f"{where}: {what} reads {missing[0]!r}, which no op makes "
                             f"and is not a constant or input (damaged model file?)")
        if len(op.output_shape) != len(op.output) or len(op.output_type) != len(op.output):
            raise ModelError(f"{where}: {what} has {len(op.output)} output(s) but "
                             f"{len(op.output_shape)} shape(s) and {len(op.output_type)} type(s)")
        for k, (t, shape, dt) in enumerate(zip(op.output, op.output_shape, op.output_type)):
            _check_shape(shape.dims, f"{what} output '{t}'", where)
            _dtype(dt, f"{what} output '{t}'", where)
            if dt in ZERO_RANGE and k < len(op.quantize_info):
                info = op.quantize_info[k]
                _check_quant([info.scale], [info.zero_point], dt, f"{what} output '{t}'", where)
    for info in net.output_info:
        if info.name not in known:
            raise ModelError(f"{where}: output '{info.name}' is made by no op (damaged model file?)")


def _check_const(t, data_bytes: int, where) -> None:
    what = f"constant '{t.name}'"
    _check_shape(t.dims, what, where)
    itemsize = _dtype(t.data_type, what, where).itemsize
    expected = math.prod(t.dims) * itemsize
    if t.data_size != expected:
        raise ModelError(f"{where}: {what} has dims {list(t.dims)} ({expected} bytes) but "
                         f"data_size {t.data_size}")
    if t.offset < 0 or t.offset + t.data_size > data_bytes:
        raise ModelError(f"{where}: {what} lies at bytes {t.offset}..{t.offset + t.data_size}, "
                         f"outside the {data_bytes}-byte model data")
    if t.quantized and t.data_type in ZERO_RANGE:
        scales = list(t.scales) if t.HasField("quantized_dimension") else [t.scale]
        zeros = list(t.zero_points) if t.HasField("quantized_dimension") else [t.zero_point]
        _check_quant(scales, zeros, t.data_type, what, where)


def _check_quant(scales, zeros, dt: int, what: str, where) -> None:
    bad = [s for s in scales if not MIN_SCALE <= s <= MAX_SCALE]   # NaN fails both
    if bad:
        raise ModelError(f"{where}: {what} has quantization scale {bad[0]:.6g}: it must be a finite, "
                         f"positive, normal float32 ({MIN_SCALE:.3g}..{MAX_SCALE:.3g})")
    lo, hi = ZERO_RANGE[dt]
    off = [z for z in zeros if not lo <= z <= hi]
    if off:
        raise ModelError(f"{where}: {what} has zero point {off[0]}, outside {lo}..{hi} of its type")


def _check_shape(dims, what: str, where) -> None:
    dims = list(dims)
    if any(d < 0 or d > MAX_DIM for d in dims):
        raise ModelError(f"{where}: {what} has dims {dims}: each must be 0..{MAX_DIM}")
    if math.prod(dims) > MAX_ELEMENTS:
        raise ModelError(f"{where}: {what} has dims {dims}: {math.prod(dims)} elements is beyond "
                         f"any model")


def _dtype(dt: int, what: str, where) -> np.dtype:
    try:
        return to_numpy(dt)
    except ValueError:
        name = pb.DataType.Name(dt) if dt in pb.DataType.values() else dt
        raise ModelError(f"{where}: {what} has data type {name}, which this runtime does not load") from None
