"""Variable input dimensions (input_shapes: -1..8,...): make the converted graph follow them,
or find the op that cannot.

The frontends and passes fold shapes at the converted values: a Reshape's target resolved
(Flatten's sizes, targets computed by Shape -> Gather -> Concat), constants made from shapes.
convert converts the model again with a variable dimension at another value (a probe; the
dimensions declared with the same range move together, as a sequence length shared by token
ids and their mask must) and compares the graphs op by op. A Reshape whose dims follow the input is rewritten with 0 (copy
the input's dimension) and -1 (the rest), which shape inference re-derives at any shape;
checked against every probe. Any other difference (an arg, a constant, another graph) pins that
dimension: the op and the reason are recorded (mace/ir/shape_ranges.py) for engine.resize to name.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ir.graph import Graph
from mace.ops.reshape import resolve_shape


@dataclass
class Probe:
    dims: tuple             # ((input, dim), ...): the variable dimensions moved together
    value: int
    graph: Graph | None     # None: converting at `value` failed
    error: str = ""


def probe_values(nominal: int, low: int, high: int | None) -> list:
    """The values convert checks a dimension at: the next one (an op treating the converted
    value specially shows there) and the far end of the range (or nominal + 7 unbounded)."""
    far = high if high is not None else nominal + 7
    values = [v for v in (nominal + 1, far) if v != nominal and v >= low and (high is None or v <= high)]
    return sorted(set(values))


def generalize(graph: Graph, base: Graph, probes: list) -> dict:
    """Rewrite `graph`'s Reshapes to follow the probed dimensions; returns the pins,
    {(input, dim): why}. `base` is the model converted the way the probes were (float) at
    the converted shapes: `graph` itself unless convert quantized it."""
    pins, pairs, varied_by = {}, defaultdict(lambda: [None]), defaultdict(set)
    for p in probes:
        if all(key in pins for key in p.dims):
            continue
        why = p.error or _compare(base, p.graph, pairs, varied_by, p.dims)
        if why:
            moved = " and ".join(f"'{name}' dimension {dim}" for name, dim in p.dims)
            for key in p.dims:
                pins.setdefault(key, f"{why} (converted again with {moved} = {p.value})")
    base_ops = {op.name: op for op in base.net.op}
    ops = {op.name: op for op in graph.net.op}
    for name, seen in pairs.items():
        op = base_ops[name]
        seen[0] = (base.specs[op.input[0]][0], list(get_arg(op, "dims")))
        dims, why = _symbolic_dims(op, seen)
        if why is None and name not in ops:
            why = f"op '{name}' (Reshape) is not in the final graph under that name"
        if why:
            for key in varied_by[name]:
                pins.setdefault(key, why)
        else:
            set_arg(ops[name], "dims", dims)
    return pins


def _compare(base: Graph, other: Graph, pairs, varied_by, keys) -> str:
    """Why `other` cannot be `base` at another shape ("" when it can); Reshape dims are
    collected into `pairs` {op name: [None, (input shape, dims), ...]}."""
    if len(base.net.op) != len(other.net.op):
        return f"the graph has {len(other.net.op)} ops there instead of {len(base.net.op)}"
    for a, b in zip(base.net.op, other.net.op):
        where = f"op '{a.name}' ({a.type})"
        if (a.type, a.name, list(a.input), list(a.output)) != (b.type, b.name, list(b.input), list(b.output)):
            return f"{where} differs in the graph converted there"
        for t in a.input:
            if t in base.consts and not _same(base.consts[t], other.consts.get(t)):
                return f"{where} reads constant '{t}', folded from the input shape"
        args_a, args_b = _args(a), _args(b)
        changed = sorted(n for n in set(args_a) | set(args_b) if args_a.get(n) != args_b.get(n))
        if not changed:
            continue
        if a.type == "Reshape" and changed == ["dims"]:
            pairs[a.name].append((other.specs[b.input[0]][0], args_b["dims"]))
            varied_by[a.name].update(keys)
        else:
            return f"{where} has {', '.join(changed)} computed from the input shape"
    return ""


def _symbolic_dims(op, seen: list) -> tuple:
    """(dims with 0 / -1 that give every seen (input shape, dims) pair, None) or (None, why)."""
    where = f"op '{op.name}' (Reshape)"
    dims0 = seen[0][1]
    if get_arg(op, "allowzero", 0) or any(len(d) != len(dims0) for _, d in seen):
        return None, f"{where} has a target shape computed from the input shape"
    varying = [i for i in range(len(dims0)) if any(d[i] != dims0[i] for _, d in seen)]
    dims = list(dims0)
    free = []
    for i in varying:
        if all(i < len(s) and d[i] == s[i] for s, d in seen):
            dims[i] = 0          # copies the input's dimension
        else:
            free.append(i)
    if len(free) > 1:
        return None, f"{where} has target dimensions {free} that all change with the input"
    if free:
        dims[free[0]] = -1       # the rest of the elements
    try:
        if all(resolve_shape(s, dims) == tuple(d) for s, d in seen):
            return dims, None
    except ValueError:
        pass
    return None, f"{where} has a target shape computed from the input shape"


def _args(op) -> dict:
    return {a.name: get_arg(op, a.name) for a in op.arg}


def _same(a, b) -> bool:
    return b is not None and a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
