"""What convert can know of a small tensor computed at run time: per element, bounds, and
where it has one, its exact value in terms of a data-dependent length.

The TensorFlow Object Detection API sizes its outputs from the rows NMS kept, n:
`range(min(100, n))`, `slice(rows, 0, select(n - 100 > 0, 100, -1))`, `pad(rows, [[0, 100 - n],
[0, 0]])`. n is a `Shape` of a tensor planned at its upper bound (mark_ragged), so none of these
fold; but with n in [0, bound] and known to *be* that tensor's length, convert can say that
`n - 100 > 0` is false when bound <= 100, that `min(100, n)` is n, and that the pad makes
exactly 100 rows. Each element is a `Bound`: its value lies in [lo, hi], and where `length` is
set it equals offset + scale * (the run's value of that length tensor, mace/ir/ragged.py).

`value_bounds(graph, tensor)` follows the ops such scalars go through (Shape, Cast, Reshape,
StridedSlice, Concat, Gather and Split of constant positions, Eltwise arithmetic, minimum,
maximum and comparisons, Select); any other producer makes the answer None. The frontends ask
it of a Range's limit, a Slice's size and a Pad's paddings that are not constants.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mace.ir.args import get_arg
from mace.ops._common import normalize_axis
from mace.ops.strided_slice import slices
from mace.transform.passes.fold_constants import shape_depends_on_data
from mace.transform.passes.mark_ragged import ragged_tensors


@dataclass(frozen=True)
class Bound:
    lo: float
    hi: float
    length: str | None = None   # the length tensor the value is a function of, if known
    scale: float = 0
    offset: float = 0

    @property
    def exact(self) -> bool:
        return self.lo == self.hi

    def __repr__(self):
        if self.exact:
            return f"={self.lo:g}"
        form = f" = {self.offset:g} + {self.scale:g}*len({self.length})" if self.length else ""
        return f"[{self.lo:g}, {self.hi:g}]{form}"


def exact(v) -> Bound:
    v = v.item() if hasattr(v, "item") else v
    return Bound(v, v, None, 0, v)


def length_of(tensor: str, bound: int) -> Bound:
    """The run's value of a length tensor whose tensor is planned at `bound` rows."""
    return Bound(0, bound, tensor, 1, 0)


def add(a: Bound, b: Bound) -> Bound:
    if a.exact and b.exact:
        return exact(a.lo + b.lo)
    lo, hi = a.lo + b.lo, a.hi + b.hi
    if b.exact and a.length:
        return Bound(lo, hi, a.length, a.scale, a.offset + b.lo)
    if a.exact and b.length:
        return Bound(lo, hi, b.length, b.scale, b.offset + a.lo)
    if a.length and a.length == b.length:   # one length: n - n is known, 2n within tighter bounds
        scale, offset = a.scale + b.scale, a.offset + b.offset
        if scale == 0:
            return exact(offset)
        lo, hi = _range_of(scale, offset, a, b)
        return Bound(lo, hi, a.length, scale, offset)
    return Bound(lo, hi)


def _range_of(scale, offset, a, b):
    """Bounds of offset + scale * n, n within both a's and b's ranges of the length."""
    n_lo, n_hi = max(_length_range(a)[0], _length_range(b)[0]), min(_length_range(a)[1], _length_range(b)[1])
    ends = (offset + scale * n_lo, offset + scale * n_hi)
    return min(ends), max(ends)


def _length_range(x: Bound):
    """The range of the length itself that x's bounds imply (x = offset + scale * n)."""
    ends = sorted(((x.lo - x.offset) / x.scale, (x.hi - x.offset) / x.scale))
    return ends[0], ends[1]


def scale_by(a: Bound, m) -> Bound:
    lo, hi = sorted((a.lo * m, a.hi * m))
    if a.exact or m == 0:
        return exact(a.lo * m)
    return Bound(lo, hi, a.length, a.scale * m, a.offset * m) if a.length else Bound(lo, hi)


def neg(a: Bound) -> Bound:
    return scale_by(a, -1)


def minimum(a: Bound, b: Bound) -> Bound:
    if a.hi <= b.lo:
        return a
    if b.hi <= a.lo:
        return b
    return Bound(min(a.lo, b.lo), min(a.hi, b.hi))


def maximum(a: Bound, b: Bound) -> Bound:
    if a.lo >= b.hi:
        return a
    if b.lo >= a.hi:
        return b
    return Bound(max(a.lo, b.lo), max(a.hi, b.hi))


TRUE, FALSE, EITHER = exact(1), exact(0), Bound(0, 1)


def compare(kind: str, a: Bound, b: Bound) -> Bound:
    """a <kind> b from the bounds of a - b (the same length cancels: n - 100 > 0)."""
    d = add(a, neg(b))
    decided = {
        "GREATER": (d.lo > 0, d.hi <= 0), "GREATER_EQUAL": (d.lo >= 0, d.hi < 0),
        "LESS": (d.hi < 0, d.lo >= 0), "LESS_EQUAL": (d.hi <= 0, d.lo > 0),
        "EQUAL": (d.exact and d.lo == 0, d.lo > 0 or d.hi < 0),
        "NOT_EQUAL": (d.lo > 0 or d.hi < 0, d.exact and d.lo == 0),
    }[kind]
    return TRUE if decided[0] else FALSE if decided[1] else EITHER


def select(c: Bound, t: Bound, e: Bound) -> Bound:
    if c.exact:
        return t if c.lo else e
    if t == e:
        return t
    return Bound(min(t.lo, e.lo), max(t.hi, e.hi))


_BINARY = {"SUM": add, "SUB": lambda a, b: add(a, neg(b)), "MIN": minimum, "MAX": maximum}
_COMPARE = {"GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "EQUAL", "NOT_EQUAL"}


def value_bounds(graph, tensor: str, ragged: dict | None = None):
    """An object array of `Bound`s shaped like `tensor`, or None where some op on the way is
    not one this follows. `ragged`: mark_ragged's {tensor: (axis, length, source)} of the graph
    (computed when not given)."""
    if ragged is None:
        ragged = ragged_tensors(graph)
    return _Walk(graph, ragged).of(tensor)


class _Walk:
    def __init__(self, graph, ragged):
        self.graph, self.ragged = graph, ragged
        self.producers = graph.producers()
        self.seen = {}

    def of(self, tensor):
        if tensor not in self.seen:
            self.seen[tensor] = self._compute(tensor)
        return self.seen[tensor]

    def _compute(self, tensor):
        if tensor in self.graph.consts:
            v = np.asarray(self.graph.consts[tensor])
            if v.size > 64 or v.dtype.kind not in "biuf":   # only small index-like values matter
                return None
            return _objects(v.shape, [exact(x) for x in v.reshape(-1).tolist()])
        op = self.producers.get(tensor)
        if op is None:
            return None
        ins = [self.of(t) for t in op.input]
        if op.type == "Shape":
            return self._shape(op)
        if any(x is None for x in ins):
            return None
        out_shape = tuple(self.graph.shape(tensor))
        return self._op(op, ins, tensor, out_shape)

    def _shape(self, op):
        x = op.input[0]
        shape = list(self.graph.shape(x))
        axis, length, _ = self.ragged.get(x, (None, None, None))
        if axis is None and shape_depends_on_data(self.graph, x):   # planned at a bound, length unknown
            return None
        values = [length_of(length, d) if i == axis else exact(d) for i, d in enumerate(shape)]
        start, end = _arg(op, "start", 0), _arg(op, "end", None)
        kept = values[start:end]
        return _objects((len(kept),), kept)

    def _op(self, op, ins, tensor, out_shape):
        t = op.type
        if t in ("Identity", "Cast", "Reshape"):
            return ins[0].reshape(out_shape)
        if t == "StridedSlice":
            return ins[0][slices(lambda n, d=None: _arg(op, n, d), ins[0].shape, op.name)[0]].reshape(out_shape)
        if t == "Concat":
            return np.concatenate(ins, axis=normalize_axis(_arg(op, "axis", 0), len(out_shape)))
        if t == "Gather" and all(b.exact for b in ins[1].reshape(-1)):
            idx = np.array([int(b.lo) for b in ins[1].reshape(-1)], np.int64).reshape(ins[1].shape)
            return np.take(ins[0], idx, axis=normalize_axis(_arg(op, "axis", 0), ins[0].ndim))
        if t == "Split":
            axis = normalize_axis(_arg(op, "axis", 0), ins[0].ndim)
            parts = np.split(ins[0], np.cumsum(_arg(op, "split"))[:-1], axis=axis)
            return parts[list(op.output).index(tensor)]
        if t == "Select":
            return _elementwise(select, ins, out_shape)
        if t == "Eltwise":
            kind = _arg(op, "type")
            if kind in _BINARY and len(ins) == 2:
                return _elementwise(_BINARY[kind], ins, out_shape)
            if kind in _COMPARE and len(ins) == 2:
                return _elementwise(lambda a, b: compare(kind, a, b), ins, out_shape)
            if kind == "PROD" and len(ins) == 2:
                return _elementwise(_product, ins, out_shape)
            if kind == "NEG" and len(ins) == 1:
                return _elementwise(neg, ins, out_shape)
        return None


def _product(a: Bound, b: Bound) -> Bound:
    if b.exact:
        return scale_by(a, b.lo)
    if a.exact:
        return scale_by(b, a.lo)
    ends = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return Bound(min(ends), max(ends))


def _elementwise(fn, ins, out_shape):
    parts = np.broadcast_arrays(*ins)
    flat = [fn(*xs) for xs in zip(*(p.reshape(-1) for p in parts))]
    return _objects(out_shape, flat)


def _objects(shape, values):
    arr = np.empty(len(values), object)
    arr[:] = values
    return arr.reshape(shape)


def _arg(op, name, default=None):
    return get_arg(op, name, default)   # None, not a KeyError, for an arg the op does not set


def count_bound(start: Bound, limit: Bound, delta: Bound) -> int | None:
    """The most values Range(start, limit, delta) can give, or None when delta is not known."""
    if not delta.exact or delta.lo == 0:
        return None
    if delta.lo > 0:
        n = math.ceil((limit.hi - start.lo) / delta.lo)
    else:
        n = math.ceil((limit.lo - start.hi) / delta.lo)
    return max(int(n), 0)
