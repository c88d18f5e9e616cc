"""Model outputs whose length depends on the data (NonZero, NonMaxSuppression, TopK of a
computed k, and what follows them element-wise): kept in the net's `ragged_outputs` arg,
{output: [length tensor, axis]}, written by the mark_ragged pass
(mace/transform/passes/mark_ragged.py). The engine cuts each such output to the length its
length tensor holds after a run, and the memory plan keeps those tensors to the end."""
from __future__ import annotations

import json

from mace.ir.args import del_arg, get_arg, set_arg

RAGGED_ARG = "ragged_outputs"


def record_ragged_outputs(net, outputs: dict) -> None:
    """outputs {output: (length tensor, axis)}; none: the arg is removed."""
    del_arg(net, RAGGED_ARG)
    if outputs:
        set_arg(net, RAGGED_ARG, json.dumps({n: [t, a] for n, (t, a) in outputs.items()}, sort_keys=True))


def ragged_outputs(net) -> dict:
    """{output: (length tensor, axis)} of the model's data-dependent outputs."""
    raw = json.loads(get_arg(net, RAGGED_ARG, "") or "{}")
    return {n: (t, int(a)) for n, (t, a) in raw.items()}
