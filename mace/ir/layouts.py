"""Which layout each activation tensor is stored in, relative to the framework's own.

The to_nhwc pass decides, per tensor, a permutation `perm`: the engine stores
the tensor as framework_value.transpose(perm). It records the non-identity ones
here (a JSON net argument) so that tools comparing our intermediate tensors
with the framework's (layer-by-layer validation, divergence search) know when
to transpose. Tensors absent from the record are stored in the framework's
layout; graph inputs and outputs are in the caller's layout (input/output_info).
"""
from __future__ import annotations

import json

from mace.ir.args import get_arg, set_arg

ARG = "stored_perms"


def record_perms(graph, perms: dict) -> None:
    """Remember `perms` (tensor -> perm) for the activation tensors that are not stored as-is."""
    keep = {name: list(p) for name, p in sorted(perms.items())
            if name not in graph.consts and list(p) != list(range(len(p)))}
    set_arg(graph.net, ARG, json.dumps(keep, separators=(",", ":")))


def stored_perms(net) -> dict:
    """tensor -> perm (tuple) as recorded by record_perms; {} for models converted before it."""
    text = get_arg(net, ARG, "")
    return {name: tuple(p) for name, p in json.loads(text).items()} if text else {}
