"""The variable input dimensions of a converted model, kept in its net's args.

`shape_ranges`: {input: {dim: [low, high or null]}} as the deployment file declared them
(input_shapes: -1..8,...; dims in the caller's layout, as the graph's inputs are).
`shape_pins`: {input: {dim: why}} for the declared dimensions the converted graph cannot follow
(an op folded the converted value in: convert found it by converting again at other values,
mace/transform/variable_shapes.py); the engine refuses to resize those, naming the op.
JSON in one string arg each: readable in the .pb_txt, no schema change for old runners.
"""
from __future__ import annotations

import json

from mace.ir.args import get_arg, set_arg

RANGES_ARG = "shape_ranges"
PINS_ARG = "shape_pins"


def record_shape_ranges(net, ranges: dict, pins: dict) -> None:
    """ranges {input: {dim: (low, high)}}, pins {input: {dim: reason}}; empty ones are left out."""
    if ranges:
        set_arg(net, RANGES_ARG, json.dumps({n: {str(d): list(r) for d, r in dims.items()}
                                             for n, dims in ranges.items()}, sort_keys=True))
    if pins:
        set_arg(net, PINS_ARG, json.dumps({n: {str(d): why for d, why in dims.items()}
                                           for n, dims in pins.items()}, sort_keys=True))


def shape_ranges(net) -> dict:
    """{input: {dim: (low, high or None)}} (empty: every dimension is the converted one)."""
    raw = json.loads(get_arg(net, RANGES_ARG, "") or "{}")
    return {n: {int(d): (r[0], r[1]) for d, r in dims.items()} for n, dims in raw.items()}


def shape_pins(net) -> dict:
    """{input: {dim: why the converted graph keeps that dimension at its converted value}}."""
    raw = json.loads(get_arg(net, PINS_ARG, "") or "{}")
    return {n: {int(d): why for d, why in dims.items()} for n, dims in raw.items()}
