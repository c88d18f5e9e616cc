"""Quantization-aware ranges a model carried, kept as NetDef args for the quantize pass.

TensorFlow's FakeQuantWithMinMaxVars/Args and ONNX QuantizeLinear -> DequantizeLinear
pairs on activations give a tensor the range it was trained (or calibrated) with.
The frontends record it as five parallel net args, whatever the framework:

    fake_quant_tensors        tensor names of the converted model
    fake_quant_min/max        the range (before any nudging)
    fake_quant_num_bits       8 for uint8/int8, 16 for (u)int16 ONNX Q/DQ
    fake_quant_narrow_range   1 when the lowest integer is left out (TF narrow_range)

The quantize pass (mace/transform/passes/quantize.py) gives them priority over every
other range source. Passes that make a recorded tensor disappear under another name
call `carry_range` so the range follows it.
"""
from __future__ import annotations

from mace.ir.args import del_arg, get_arg, set_arg

KEYS = ("fake_quant_tensors", "fake_quant_min", "fake_quant_max", "fake_quant_num_bits",
        "fake_quant_narrow_range")


def qat_ranges(net) -> dict:
    """tensor name -> (min, max, num_bits, narrow_range) for a NetDef (empty when none)."""
    columns = [get_arg(net, key, []) for key in KEYS]
    return {t: (float(lo), float(hi), int(bits), int(narrow))
            for t, lo, hi, bits, narrow in zip(*columns)}


def _write(net, ranges: dict) -> None:
    if not ranges:
        for key in KEYS:
            del_arg(net, key)
        return
    rows = list(ranges.items())
    set_arg(net, KEYS[0], [t for t, _ in rows])
    set_arg(net, KEYS[1], [float(r[0]) for _, r in rows])
    set_arg(net, KEYS[2], [float(r[1]) for _, r in rows])
    set_arg(net, KEYS[3], [int(r[2]) for _, r in rows])
    set_arg(net, KEYS[4], [int(r[3]) for _, r in rows])


def record_ranges(net, entries) -> None:
    """Add (tensor, min, max, num_bits, narrow_range) rows; a tensor recorded before keeps
    its first range (the one nearest the producer)."""
    ranges = qat_ranges(net)
    for tensor, lo, hi, bits, narrow in entries:
        ranges.setdefault(tensor, (float(lo), float(hi), int(bits), int(bool(narrow))))
    _write(net, ranges)


def _through_activation(activation, lo: float, hi: float):
    """The range after a fused RELU/RELUX of a tensor in [lo, hi]; None for other kinds."""
    kind, limit = activation
    if kind == "RELU":
        return max(lo, 0.0), max(hi, 0.0)
    if kind == "RELUX":
        return min(max(lo, 0.0), limit), min(max(hi, 0.0), limit)
    return None


def carry_range(net, old: str, new: str, activation=None, keep_old: bool = False) -> None:
    """Tensor `old` is (about to be) written as `new`: give `new` old's range unless it has
    its own. `activation` = (kind, max_limit) when a fused activation now sits between
    them (only RELU/RELUX ranges carry); `keep_old` when `old` still exists afterwards."""
    if not any(a.name == KEYS[0] for a in net.arg):  # the common case: a float model
        return
    ranges = qat_ranges(net)
    if old not in ranges:
        return
    lo, hi, bits, narrow = ranges[old] if keep_old else ranges.pop(old)
    if new not in ranges:
        mapped = (lo, hi) if activation is None else _through_activation(activation, lo, hi)
        if mapped is not None:
            ranges[new] = (*mapped, bits, narrow)
    _write(net, ranges)
