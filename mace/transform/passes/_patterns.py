"""What the fusion passes ask of the ops around a pattern: an Eltwise of a kind, the other input
of a binary op, the single reader of a tensor. One place, so the passes agree on what counts."""
from __future__ import annotations

from mace.ir.args import get_arg


def eltwise(op, kind: str, plain: bool = False) -> bool:
    """`op` is a two-input Eltwise of `kind` with no coefficients (and, `plain`, no fused
    activation either)."""
    return (op is not None and op.type == "Eltwise" and get_arg(op, "type") == kind and len(op.input) == 2
            and not get_arg(op, "coeff", None) and not (plain and get_arg(op, "activation", "")))


def other_input(op, name):
    """The input of two-input `op` that is not `name` (None if `name` is not one of them)."""
    if len(op.input) != 2 or name not in op.input:
        return None
    return op.input[1] if op.input[0] == name else op.input[0]


def only_reader(consumers: dict, outputs, name):
    """The one op reading `name` (graph.consumers()), if there is exactly one and `name` is not
    a model output (`outputs`), else None."""
    readers = consumers.get(name, [])
    return readers[0] if len(readers) == 1 and name not in outputs else None
