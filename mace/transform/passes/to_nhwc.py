"""to_nhwc: run 4-D activations in NHWC whatever layout the framework used.

Every tensor gets a `perm`: it is stored as logical.transpose(perm), where
"logical" is the framework's own layout. Walking ops in order, by the layout
class each op type declares in the registry:

  FIXED (conv, pooling, ...)   input 0 must be stored NHWC; op switches to
                               data_format NHWC; its output is stored NHWC.
  ELEMENTWISE                  follows its inputs when they agree (constants are
                               transposed to match, 0-d ones broadcast in any layout);
                               otherwise falls back.
  AXIS (concat, softmax, ...)  follows its input after `remap_axes` rewrites
                               its axis arguments.
  ANY (reshape, matmul, ...)   sees the logical layout.

A Transpose is inserted only where a tensor's perm differs from what its
consumer needs; fold_transposes then cancels the pairs that meet.
Model inputs and outputs keep the layout the caller uses.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ir.graph import _copy_op
from mace.ir.layouts import record_perms
from mace.ir.qat_ranges import carry_range
from mace.ops._common import NCHW_TO_NHWC
from mace.ops.registry import Layout, spec
from mace.transform.shape_inference import infer_shapes


def _ident(rank):
    return tuple(range(rank))


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


class _Rewriter:
    def __init__(self, graph):
        self.graph = graph
        self.perm = {}
        self.ops = []
        self.cache = {}

    def rank(self, t):
        return len(self.graph.shape(t))

    def perm_of(self, t):
        return self.perm.get(t, _ident(self.rank(t)))

    def stored_as(self, t, want):
        """Name of a tensor holding `t` stored as logical.transpose(want)."""
        want = tuple(want)
        cur = self.perm_of(t)
        if cur == want:
            return t
        key = (t, want)
        if key not in self.cache:
            if t in self.graph.consts:
                logical = np.asarray(self.graph.consts[t]).transpose(_inverse(cur))
                name = self.graph.add_const(self.graph.unique_name(t + "_t"), logical.transpose(want))
            else:
                inv = _inverse(cur)
                name = self.graph.unique_name(t + "_t")
                self.ops.append(self.graph.make_op("Transpose", [t], [name], dims=[inv[w] for w in want]))
                self.perm[name] = want
            self.cache[key] = name
        return self.cache[key]

    def const_like(self, t, perm, rank):
        """Constant `t`, broadcast-aligned to `rank` dims, stored with `perm`."""
        value = np.asarray(self.graph.consts[t])
        aligned = value.reshape((1,) * (rank - value.ndim) + value.shape)
        name = self.graph.unique_name(t + "_t")
        return self.graph.add_const(name, np.ascontiguousarray(aligned.transpose(perm)))

    # ---- per layout class -------------------------------------------------
    def fixed(self, op):
        fmt = get_arg(op, "data_format", "NHWC")
        x = op.input[0]
        if fmt == "NCHW" and self.rank(x) == 4:
            op.input[0] = self.stored_as(x, NCHW_TO_NHWC)
            set_arg(op, "data_format", "NHWC")
            for t in op.output:
                if self.rank(t) == 4:
                    self.perm[t] = NCHW_TO_NHWC
        else:
            op.input[0] = self.stored_as(x, _ident(self.rank(x)))

    def follow(self, op, layout):
        """ELEMENTWISE / AXIS ops: keep the inputs' common perm when possible. A 0-d operand
        computed at run time (quantize_dynamic's scale product) broadcasts the same in any
        layout: it does not take part."""
        live = [t for t in op.input if t not in self.graph.consts
                and not (layout == Layout.ELEMENTWISE and self.rank(t) == 0)]
        perms = {self.perm_of(t) for t in live}
        if len(perms) != 1:
            return self.any(op)
        p = perms.pop()
        rank = len(p)
        if p == _ident(rank) or any(self.rank(t) != rank for t in live):
            return self.any(op)
        if layout == Layout.ELEMENTWISE:
            if self.rank(op.output[0]) != rank or any(
                    self.graph.consts[t].ndim > rank for t in op.input if t in self.graph.consts):
                return self.any(op)
            out_perm = p
            carried = [t in self.graph.consts for t in op.input]  # constants broadcast: align them
        else:
            trial = _copy_op(op)
            out_perm = spec(op.type).remap_axes(trial, p, [self.rank(t) for t in op.input])
            if out_perm is None:
                return self.any(op)
            op.CopyFrom(trial)
            # Only same-rank constants carry the layout (Concat operands); index, shape or
            # parameter inputs of AXIS ops are left alone.
            carried = [t in self.graph.consts and self.graph.consts[t].ndim == rank for t in op.input]
        for i, t in enumerate(list(op.input)):
            if carried[i]:
                op.input[i] = self.const_like(t, p, rank)
        for t in op.output:
            self.perm[t] = tuple(out_perm) if self.rank(t) == len(out_perm) else _ident(self.rank(t))

    def any(self, op):
        for i, t in enumerate(op.input):
            if t not in self.graph.consts:
                op.input[i] = self.stored_as(t, _ident(self.rank(t)))

    def transpose(self, op):
        p = self.perm_of(op.input[0])
        inv = _inverse(p)
        dims = get_arg(op, "dims", []) or list(range(len(p)))[::-1]
        set_arg(op, "dims", [inv[d] for d in dims])

    def run(self):
        for original in self.graph.net.op:
            op = _copy_op(original)
            layout = spec(op.type).layout
            if op.type == "Transpose":
                self.transpose(op)
            elif layout == Layout.FIXED:
                self.fixed(op)
            elif layout in (Layout.ELEMENTWISE, Layout.AXIS):
                self.follow(op, layout)
            else:
                self.any(op)
            self.ops.append(op)
        self._restore_outputs()
        return self.ops

    def _restore_outputs(self):
        for out in self.graph.output_names:
            p = self.perm_of(out)
            if p == _ident(len(p)):
                continue
            inner = self.graph.unique_name(out + "_nhwc")
            carry_range(self.graph.net, out, inner, keep_old=True)  # same values, transposed
            for op in self.ops:
                op.output[:] = [inner if t == out else t for t in op.output]
                op.input[:] = [inner if t == out else t for t in op.input]
            self.perm[inner] = p
            self.ops.append(self.graph.make_op("Transpose", [inner], [out], dims=list(_inverse(p))))


def to_nhwc(graph, options) -> bool:
    infer_shapes(graph)
    before = [(op.type, list(op.input)) for op in graph.net.op]
    rewriter = _Rewriter(graph)
    graph.set_ops(rewriter.run())
    record_perms(graph, rewriter.perm)  # layer-by-layer validation transposes by these
    infer_shapes(graph)
    return before != [(op.type, list(op.input)) for op in graph.net.op]
