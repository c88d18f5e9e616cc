"""Variable input dimensions (input_shapes: -1..8,...): make the converted graph follow them,
or find the op that cannot.

The frontends and passes fold shapes at the converted values: a Reshape's target resolved
(Flatten's sizes, targets computed by Shape -> Gather -> Concat), constants made from shapes.
convert converts the model again with a variable dimension at another value (a probe; the
dimensions declared with the same range move together, as a sequence length shared by token
ids and their mask must) and compares the graphs op by op, then rewrites what follows a rule
that every probe confirms:
- a Reshape whose dims follow the input gets 0 (copy the input's dimension) and -1 (the rest),
  which shape inference re-derives at any shape; an Expand, 1 where it keeps the input's own;
  a StridedSlice's bounds, counted from the end of the axis (x[:, -1], x[:, :S - 1]);
  a resize's output size, -1 (input x its scale) where the size followed the input;
- a constant that is, at every probe, the leading part of the one at the longest probe along
  the axes that grow with the dimension (a position table taken to the sequence length, the
  token-type rows, a causal mask) becomes that longest table cut by a PrefixSlice op
  (mace/ops/prefix_slice.py) to the input's dimension.
Any other difference (an arg, another constant, another graph) pins that dimension: the op and
the reason are recorded (mace/ir/shape_ranges.py) for engine.resize to name.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ir.graph import Graph
from mace.ops.infer import infer_op
from mace.ops._common import to_nhwc_shape
from mace.ops._resize import resolved_size
from mace.ops.reshape import resolve_shape
from mace.ops.strided_slice import axis_slice


@dataclass
class Probe:
    dims: tuple             # ((input, dim), ...): the variable dimensions moved together
    value: int
    graph: Graph | None     # None: converting at `value` failed
    error: str = ""


@dataclass
class _Seen:
    """What the probes showed to differ from the converted graph."""
    targets: dict = field(default_factory=lambda: defaultdict(list))    # op -> [(input shape, its target)]
    tables: dict = field(default_factory=lambda: defaultdict(list))     # const -> [(value, array)]
    readers: dict = field(default_factory=dict)                         # const -> "op 'x' (T)"
    varied_by: dict = field(default_factory=lambda: defaultdict(set))   # op or const -> {(input, dim)}


def probe_values(nominal: int, low: int, high: int | None) -> list:
    """The values convert checks a dimension at: the next one on the converted value's grid
    (its largest power-of-two factor up to 32: 1 for a batch of 1, 32 for a 320-pixel side,
    which stride-32 networks need) and the farthest one on that grid in the range (4 steps on
    when unbounded)."""
    step = min(nominal & -nominal, 32) if nominal > 0 else 1
    far = nominal + 4 * step if high is None else nominal + (high - nominal) // step * step
    values = [v for v in (nominal + step, far) if v != nominal and v >= low and (high is None or v <= high)]
    return sorted(set(values))


def generalize(graph: Graph, base: Graph, probes: list, nominal: dict | None = None) -> dict:
    """Rewrite `graph` to follow the probed dimensions; returns the pins, {(input, dim): why}.
    `base` is the model converted the way the probes were (float) at the converted shapes:
    `graph` itself unless convert quantized it. `nominal`: {(input, dim): converted value}."""
    pins, seen = {}, _Seen()
    for p in probes:
        if all(key in pins for key in p.dims):
            continue
        why = p.error or _compare(base, p.graph, seen, p.dims, p.value)
        if why:
            moved = " and ".join(f"'{name}' dimension {dim}" for name, dim in p.dims)
            for key in p.dims:
                pins.setdefault(key, f"{why} (converted again with {moved} = {p.value})")
    for name, why in _rewrite_targets(graph, base, seen).items():
        for key in seen.varied_by[name]:
            pins.setdefault(key, why)
    for name, why in _rewrite_tables(graph, base, seen, nominal or {}).items():
        for key in seen.varied_by[name]:
            pins.setdefault(key, why)
    return pins


def _compare(base: Graph, other: Graph, seen: _Seen, keys, value) -> str:
    """Why `other` cannot be `base` at another shape ("" when it can, pending the rewrites);
    what differs is collected into `seen`."""
    if len(base.net.op) != len(other.net.op):
        return f"the graph has {len(other.net.op)} ops there instead of {len(base.net.op)}"
    for a, b in zip(base.net.op, other.net.op):
        where = f"op '{a.name}' ({a.type})"
        if (a.type, a.name, list(a.input), list(a.output)) != (b.type, b.name, list(b.input), list(b.output)):
            return f"{where} differs in the graph converted there"
        for t in a.input:
            if t in base.consts and not _same(base.consts[t], other.consts.get(t)):
                if t not in other.consts:
                    return f"{where} reads constant '{t}', which the graph converted there lacks"
                seen.tables[t].append((value, other.consts[t]))
                seen.readers.setdefault(t, where)
                seen.varied_by[t].update(keys)
        args_a, args_b = _args(a), _args(b)
        changed = sorted(n for n in set(args_a) | set(args_b) if args_a.get(n) != args_b.get(n))
        if not changed:
            continue
        if changed == [TARGET_ARG.get(a.type)]:
            seen.targets[a.name].append((other.specs[b.input[0]][0], args_b[changed[0]]))
            seen.varied_by[a.name].update(keys)
        elif a.type in RESIZES and changed == ["size"]:
            seen.targets[a.name].append((other.specs[b.input[0]][0], args_b["size"]))
            seen.varied_by[a.name].update(keys)
        elif a.type == "StridedSlice" and set(changed) <= {"starts", "ends"}:
            seen.targets[a.name].append((other.specs[b.input[0]][0], (args_b["starts"], args_b["ends"])))
            seen.varied_by[a.name].update(keys)
        else:
            return f"{where} has {', '.join(changed)} computed from the input shape"
    return ""


# the arg holding the target shape of the ops whose target may follow the input
TARGET_ARG = {"Reshape": "dims", "Expand": "shape"}


def _rewrite_targets(graph, base, seen) -> dict:
    """Reshapes, Expands, resizes and slices of `graph` given targets that follow the input;
    {op: why} of those that cannot be."""
    base_ops = {op.name: op for op in base.net.op}
    ops = {op.name: op for op in graph.net.op}
    failed = {}
    for name, pairs in seen.targets.items():
        op = base_ops[name]
        if op.type == "StridedSlice":
            first = (list(get_arg(op, "starts")), list(get_arg(op, "ends")))
            target, why = _symbolic_slice(op, [(base.specs[op.input[0]][0], first)] + pairs)
        elif op.type in RESIZES:
            first = list(get_arg(op, "size"))
            target, why = _symbolic_resize(op, [(base.specs[op.input[0]][0], first)] + pairs)
        else:
            first = list(get_arg(op, TARGET_ARG[op.type]))
            rule = _symbolic_dims if op.type == "Reshape" else _symbolic_expand
            target, why = rule(op, [(base.specs[op.input[0]][0], first)] + pairs)
        if why is None and name not in ops:
            why = f"op '{name}' ({op.type}) is not in the final graph under that name"
        if why:
            failed[name] = why
        elif op.type == "StridedSlice":
            set_arg(ops[name], "starts", target[0])
            set_arg(ops[name], "ends", target[1])
        else:
            set_arg(ops[name], "size" if op.type in RESIZES else TARGET_ARG[op.type], target)
    return failed


RESIZES = ("ResizeNearestNeighbor", "ResizeBilinear")


def _symbolic_resize(op, seen: list) -> tuple:
    """(size with -1 where the output is floor(input x scale) at every probe, None) or
    (None, why): an upsampling whose sizes were computed from the input's shape."""
    why = f"op '{op.name}' ({op.type}) has an output size computed from the input shape"
    fmt, scale = get_arg(op, "data_format", "NHWC"), get_arg(op, "scale")
    size0 = seen[0][1]
    size = list(size0)
    for j in range(2):
        if all(d[j] == size0[j] for _, d in seen):
            continue
        size[j] = -1
    for s, d in seen:
        _, h, w, _ = to_nhwc_shape(s, fmt)
        if resolved_size(size, scale, h, w) != tuple(d):
            return None, why
    return size, None


PAST_END = 2**31 - 1   # a slice bound clamped to the axis's size, whatever it is


def _symbolic_slice(op, seen: list) -> tuple:
    """((starts, ends) counting from the end of the axis where they follow its size, None) or
    (None, why): x[:, :S - 1] or x[:, -1] computed at each length become -1 and -1."""
    why = f"op '{op.name}' (StridedSlice) has bounds computed from the input shape"
    (starts0, ends0) = seen[0][1]
    axes = get_arg(op, "axes", None) or list(range(len(starts0)))
    steps = get_arg(op, "steps", None) or [1] * len(starts0)
    bounds = [list(starts0), list(ends0)]
    for which in (0, 1):
        for i, value0 in enumerate(bounds[which]):
            if all(b[which][i] == value0 for _, b in seen):
                continue
            axis = [a % len(s) for s, _ in seen for a in [axes[i]]]
            gaps = {b[which][i] - s[a] for (s, b), a in zip(seen, axis)}
            if len(gaps) != 1 or steps[i] < 0:
                return None, why
            gap = gaps.pop()
            if gap > 0:
                return None, why
            bounds[which][i] = gap if gap < 0 else PAST_END
    for s, (starts, ends) in seen:
        for i, a in enumerate(axes):
            dim = s[a % len(s)]
            if axis_slice(bounds[0][i], bounds[1][i], steps[i], dim) != axis_slice(starts[i], ends[i], steps[i], dim):
                return None, why
    return (bounds[0], bounds[1]), None


def _symbolic_expand(op, seen: list) -> tuple:
    """(shape with 1 where the output follows the input's own dimension, None) or (None, why):
    Expand broadcasts, so a 1 keeps whatever the input has there."""
    shape0 = seen[0][1]
    why = f"op '{op.name}' (Expand) has a target shape computed from the input shape"
    if any(len(d) != len(shape0) for _, d in seen):
        return None, why
    shape = list(shape0)
    for i in range(len(shape0)):
        if any(d[i] != shape0[i] for _, d in seen):
            j = [i - (len(shape0) - len(s)) for s, _ in seen]
            if not all(k >= 0 and d[i] == s[k] for k, (s, d) in zip(j, seen)):
                return None, why
            shape[i] = 1
    if all(tuple(np.broadcast_shapes(tuple(s), tuple(shape))) == tuple(d) for s, d in seen):
        return shape, None
    return None, why


def _symbolic_dims(op, seen: list) -> tuple:
    """(dims with 0 / -1 that give every seen (input shape, dims) pair, None) or (None, why)."""
    where = f"op '{op.name}' (Reshape)"
    dims0 = seen[0][1]
    allowzero = int(get_arg(op, "allowzero", 0))   # PyTorch's exporter sets it: a 0 is a real zero
    if any(len(d) != len(dims0) for _, d in seen) or (-1 in dims0):
        return None, f"{where} has a target shape computed from the input shape"
    varying = [i for i in range(len(dims0)) if any(d[i] != dims0[i] for _, d in seen)]
    dims = list(dims0)
    free = []
    for i in varying:
        if not allowzero and all(i < len(s) and d[i] == s[i] for s, d in seen):
            dims[i] = 0          # copies the input's dimension
        else:
            free.append(i)
    if len(free) > 1:
        return None, f"{where} has target dimensions {free} that all change with the input"
    if free:
        dims[free[0]] = -1       # the rest of the elements
    try:
        if all(resolve_shape(s, dims, allowzero) == tuple(d) for s, d in seen):
            return dims, None
    except ValueError:
        pass
    return None, f"{where} has a target shape computed from the input shape"


def _rewrite_tables(graph, base, seen, nominal) -> dict:
    """Constants of `graph` that are prefixes of their longest probe become PrefixSlice ops of
    that table; {const: why} of those that are not."""
    failed = {}
    for name, probed in seen.tables.items():
        why = f"{seen.readers[name]} reads constant '{name}', folded from the input shape"
        keys = sorted(seen.varied_by[name])
        values = {nominal.get(k) for k in keys}
        if name not in graph.consts or not _same(graph.consts[name], base.consts[name]):
            failed[name] = f"{why}; the final graph stores it otherwise (quantized), so it cannot follow"
            continue
        if len(values) != 1 or None in values:
            failed[name] = why
            continue
        rule = _prefix_rule([(values.pop(), base.consts[name])] + probed)
        if rule is None:
            failed[name] = why
            continue
        table, axes, offset = rule
        _add_prefix_slice(graph, name, table, axes, offset, keys[0])
    return failed


def _prefix_rule(seen: list):
    """(table, axes, offset) when every (value, array) is table cut to value + offset along
    `axes` (the longest array is the table); else None."""
    arrays = [a for _, a in seen]
    if len({(a.ndim, a.dtype) for a in arrays}) != 1:
        return None
    value, table = max(seen, key=lambda s: s[0])
    axes = [i for i in range(table.ndim) if len({a.shape[i] for a in arrays}) > 1]
    offsets = {a.shape[i] - v for v, a in seen for i in axes}
    if not axes or len(offsets) != 1:
        return None
    for _, a in seen:
        if not np.array_equal(a, table[tuple(slice(0, n) for n in a.shape)],
                              equal_nan=a.dtype.kind == "f"):
            return None
    return table, axes, offsets.pop()


def _add_prefix_slice(graph, name, table, axes, offset, key) -> None:
    """`name` made by a PrefixSlice of `table` following input dimension `key`, first in the net."""
    source = graph.unique_name(f"{name}_table")
    graph.add_const(source, table)
    del graph.consts[name]
    op = graph.make_op("PrefixSlice", [source, key[0]], [name], name=graph.unique_name(f"{name}_prefix"),
                       axes=list(axes), ref_axis=int(key[1]), offset=int(offset))
    infer_op(graph, op)
    graph.set_ops([op, *graph.net.op])
    graph.record_shapes()


def _args(op) -> dict:
    return {a.name: get_arg(op, a.name) for a in op.arg}


def _same(a, b) -> bool:
    return b is not None and a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
