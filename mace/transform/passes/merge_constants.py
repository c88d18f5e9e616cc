"""merge_constants: constants of one dtype, shape and value (and quantization) become one.

An unrolled loop gives every step its own copy of the weights it reads: TensorFlow's frozen
while loops (a Keras 2 LSTM, as in ethnicolr's name classifiers, one MatMul pair per
character) converted to 6.3 MB of weights for 0.46 MB of distinct ones, all of it in the
.data file and mapped at load. The copies are merged into the first one's name.

It runs after quantize, whose per-op quantized copies of one weight merge too when their
parameters are equal (a float constant and its int8 copy differ in dtype and are never
merged). Constants under MIN_BYTES (scalars, shapes) are left as they are: nothing to gain,
and their names stay readable in dumps. A constant that is a graph output keeps its name.
"""
from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

MIN_BYTES = 1024


def merge_constants(graph, options) -> bool:
    outputs = set(graph.output_names)
    by_layout = {}   # only constants that share a dtype and shape can be equal: only those are hashed
    for name, value in graph.consts.items():
        if value.nbytes >= MIN_BYTES and name not in outputs:
            by_layout.setdefault((value.dtype.str, value.shape), []).append(name)
    first, merged = {}, {}
    for names in (group for group in by_layout.values() if len(group) > 1):
        for name in names:
            key = (_value_key(graph.consts[name]), _quant_key(graph.quant.get(name)))
            kept = first.setdefault(key, name)
            if kept != name:
                merged[name] = kept
    if not merged:
        return False
    for op in graph.net.op:
        for i, t in enumerate(op.input):
            if t in merged:
                op.input[i] = merged[t]
    for name in merged:
        del graph.consts[name]
        graph.quant.pop(name, None)
    return True


def _value_key(value) -> tuple:
    value = np.ascontiguousarray(value)
    return value.dtype.str, value.shape, hashlib.blake2b(value.tobytes(), digest_size=16).digest()


def _quant_key(params) -> tuple | None:
    """QuantParams as a key: every field, arrays by value (repr would elide long ones)."""
    if params is None:
        return None
    return tuple(_value_key(v) if isinstance(v, np.ndarray) else (type(v).__name__, str(v))
                 for v in dataclasses.astuple(params))
