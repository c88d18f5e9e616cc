"""Read the fake-quantization ranges a TensorFlow model carried (pure Python, no TensorFlow).

The frontend turns FakeQuantWithMinMaxVars/Args on activations into aliases and
keeps their ranges as five parallel NetDef args: fake_quant_tensors (tensor
names of the converted model), fake_quant_min, fake_quant_max,
fake_quant_num_bits, fake_quant_narrow_range. Fake quantization of constants
(weights) is applied while converting and not recorded.
"""
from __future__ import annotations

from mace.ir.args import get_arg

KEYS = ("fake_quant_tensors", "fake_quant_min", "fake_quant_max", "fake_quant_num_bits",
        "fake_quant_narrow_range")


def fake_quant_ranges(net) -> dict:
    """tensor name -> (min, max, num_bits, narrow_range) for a NetDef (empty when none)."""
    columns = [get_arg(net, key, []) for key in KEYS]
    return {t: (float(lo), float(hi), int(bits), int(narrow))
            for t, lo, hi, bits, narrow in zip(*columns)}
