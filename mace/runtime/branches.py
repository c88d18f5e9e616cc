"""Branches of a run-time If: the ops that only one side of a Select needs, which a run skips
when the condition picks the other side.

The ONNX frontend turns an `If` whose condition is computed at run time into both branches and
a Select per output (mace/frontends/onnx/ops_control.py): ONNX ops have no side effects, so
that is correct, but onnxruntime runs only the branch taken, and computing both made
openWakeWord's hey_jarvis (a second classifier run when the first one fires) twice the work
on every frame where it does not fire.

A Select whose condition is one element, not a constant, reads its value inputs from two
cones: the ops whose every output is read only by that cone or by the Select (in that slot),
are no graph output and have no side effects. A run that finds the condition false need not
run the `then` cone, and one that finds it true need not run the `else` cone; the Select then
copies only the side that was computed. Only the ops after the condition's producer are
skipped (the condition must be known: it is read where a reshape of it is first computed);
the memory plan is untouched, since skipping an op
changes no order and no lifetime: its output buffer is read only by its own cone and the
Select, which ignores it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from mace.ops.registry import spec


@dataclass(frozen=True)
class Branch:
    conds: tuple    # ((tensor, producing op index), ...): the Select's condition, then what it reshapes
    side: bool      # the condition's value that needs these ops
    ops: tuple      # op indices in graph order, run only when the condition is `side`

    def cond_at(self, index: int) -> str:
        """The condition tensor to read before op `index`: the one nearest the Select already
        computed there. It is alive: the Select reads the first; each other one is read by the
        reshape producing the one before it, which runs after `index`."""
        return next(t for t, made in self.conds if made < index)


def branches(graph) -> list:
    """Every Branch of the graph, one op in at most one (an If nested in a branch is skipped
    with its outer branch)."""
    ops = list(graph.net.op)
    producer = {t: i for i, op in enumerate(ops) for t in op.output}
    readers = defaultdict(list)   # tensor -> [(op index, input slot)]
    for i, op in enumerate(ops):
        for slot, t in enumerate(op.input):
            readers[t].append((i, slot))
    outputs = set(graph.output_names)
    claimed, found = set(), []
    for sel in reversed(range(len(ops))):   # outer Selects (later) claim nested ones first
        conds = _runtime_condition(graph, ops[sel], producer)
        if not conds:
            continue
        for slot, side in ((1, True), (2, False)):
            cone = _cone(ops, sel, slot, producer, readers, outputs) - claimed
            skippable = tuple(i for i in sorted(cone) if i > conds[-1][1])
            if skippable:
                claimed.update(skippable)
                found.append(Branch(conds, side, skippable))
    return found


# ops that pass their one element on unchanged: the condition is known once their input is
RESHAPES = frozenset({"Reshape", "Identity", "Squeeze", "ExpandDims", "Unsqueeze", "Flatten"})


def _runtime_condition(graph, op, producer) -> tuple:
    """The Select's one-element bool condition computed at run time, and back through the
    reshapes it comes from, to where its value is first known (the frontend reshapes an If's
    condition to a scalar after both branches): ((tensor, producer index), ...), or ()."""
    if op.type != "Select" or len(op.input) != 3 or not _one_bool(graph, op.input[0], producer):
        return ()
    chain = [op.input[0]]
    while graph.net.op[producer[chain[-1]]].type in RESHAPES:
        source = graph.net.op[producer[chain[-1]]].input[0]
        if not _one_bool(graph, source, producer):
            break
        chain.append(source)
    return tuple((t, producer[t]) for t in chain)


def _one_bool(graph, name: str, producer) -> bool:
    if name in graph.consts or name not in producer or name not in graph.specs:
        return False
    shape, dtype = graph.specs[name]
    return int(np.prod(shape)) == 1 and np.dtype(dtype) == np.bool_


def _cone(ops, sel: int, slot: int, producer, readers, outputs) -> set:
    """Indices of the ops whose outputs only Select `sel`'s input `slot` needs."""
    value = ops[sel].input[slot]
    if value not in producer or value in outputs or list(ops[sel].input).count(value) != 1:
        return set()
    cone, wanted = set(), {producer[value]}
    for i in range(producer[value], -1, -1):   # readers come after producers: one pass back
        if i not in wanted or not _skippable(ops[i]):
            continue
        if all(out not in outputs and all(r in cone or (r, s) == (sel, slot) for r, s in readers[out])
               for out in ops[i].output):
            cone.add(i)
            wanted.update(producer[t] for t in ops[i].input if t in producer)
    return cone


def _skippable(op) -> bool:
    try:
        effects = spec(op.type).side_effects
    except Exception:   # an op type no spec registers is not ours to skip
        return False
    return bool(op.output) and not effects
