"""The calls a run makes, in order: every node's bound step, with

- a run-time If's branches (mace/runtime/branches.py) each behind its condition (`Guarded`);
- the steps a kernel bound as one `sequence` (mace/ops/_common.py) called one by one: a
  closure calling them costs a Python call more each;
- after a first run, each step calling a compiled loop through numba's dispatcher calling its
  machine code directly (mace/ops/fast/binding.py, `direct`): the dispatcher resolves the
  argument types on every call, ~0.2 us, and a wake-word model's steps are 0.3-1 us each;
- after more runs of a small model, each run of such steps one compiled call (`chained`,
  mace/ops/fast/chain.py; the engine decides when), its owner None: the chain says its node.

`owners[i]` is the node index of call i (None for a Guarded call, which says itself), so a
failure names the op.
"""
from __future__ import annotations

import numpy as np

from mace.ops.fast.binding import chained, direct  # noqa: F401 (chained: the engine's, from here)


class Guarded:
    """One run step: `steps` (of nodes `indices`) run when `cond` (a one-element array) is
    `side`. `at` is the node running, for the error that names it."""
    __slots__ = ("cond", "side", "steps", "indices", "at")

    def __init__(self, cond: np.ndarray, side: bool, steps: list, indices: list):
        self.cond, self.side = cond.reshape(-1), side
        self.steps, self.indices, self.at = steps, indices, indices[0]

    def __call__(self) -> None:
        if bool(self.cond[0]) is self.side:
            for i, step in zip(self.indices, self.steps):
                self.at = i
                step()


def build(steps: list, branches: list, tensor) -> tuple:
    """(calls, owners) for `steps` (one per node) and the graph's Branches; `tensor(name)` is
    a tensor's bound array."""
    branch_of = {i: b for b in branches for i in b.ops}
    calls, owners, i = [], [], 0
    while i < len(steps):
        b = branch_of.get(i)
        if b is None:
            for part in _parts(steps[i]):
                calls.append(part)
                owners.append(i)
            i += 1
            continue
        j = i
        while j < len(steps) and branch_of.get(j) is b:
            j += 1
        flat = [(k, part) for k in range(i, j) for part in _parts(steps[k])]
        calls.append(Guarded(tensor(b.cond_at(i)), b.side, [p for _, p in flat], [k for k, _ in flat]))
        owners.append(None)   # the Guarded call says which node ran
        i = j
    return calls, owners


def tightened(calls: list) -> list:
    """`calls` with each compiled loop called without numba's dispatcher where it can be (its
    machine code for these argument types exists: after a run has called it)."""
    out = []
    for call in calls:
        if isinstance(call, Guarded):
            call.steps = [direct(s) for s in call.steps]
            out.append(call)
        else:
            out.append(direct(call))
    return out


def _parts(step) -> tuple:
    parts = getattr(step, "parts", None)   # a sequence's steps
    return (step,) if parts is None else tuple(p for s in parts for p in _parts(s))
