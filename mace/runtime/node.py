"""One bound op of a loaded model: what the engine (and the GPU runtime's staged ops) run."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Node:
    index: int
    op: object          # the OperatorDef
    kernel: object
    tag: str            # which kernel variant runs it
    inputs: list = field(default_factory=list)   # ndarrays (consts or arena views)
    outputs: list = field(default_factory=list)  # ndarrays (arena views)
