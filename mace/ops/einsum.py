"""Einsum: Einstein summation over arg `equation` (ONNX Einsum), e.g. "bhid,bhjd->bhij".

Inputs: the operands, one per comma-separated term. Labels are letters; `...` stands
for broadcast leading axes; without `->` the output is every label used once, in
alphabetical order, after the `...` axes (numpy's and ONNX's implicit mode). Layout
ANY: labels index the framework's own axes. The reference kernel is numpy's einsum
with its contraction-order optimiser (BLAS for the attention products).
"""
import re

import numpy as np

from mace.ops._common import broadcast_shape
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op

_TERM = re.compile(r"^(?:[A-Za-z]*(?:\.\.\.)?[A-Za-z]*)$")


def parse_equation(equation: str, n_inputs: int):
    """(input terms, output term) with spaces removed; raises ValueError when malformed."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != n_inputs:
        raise ValueError(f"equation '{equation}' has {len(terms)} operand term(s) for "
                         f"{n_inputs} input(s)")
    if not all(_TERM.match(t) for t in terms) or (arrow and not _TERM.match(rhs)):
        raise ValueError(f"equation '{equation}' is not of the form 'ab,bc->ac' "
                         f"(letters, optional '...')")
    if not arrow:  # implicit output: labels seen once, sorted, broadcast axes first
        letters = "".join(terms).replace(".", "")
        rhs = ("..." if any("..." in t for t in terms) else "") + \
            "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if "..." in rhs and not any("..." in t for t in terms):
        raise ValueError(f"equation '{equation}': '...' in the output but in no operand")
    return terms, rhs


def einsum_shape(equation: str, shapes) -> tuple:
    """Output shape of `equation` over operands of `shapes` (raises on a mismatch)."""
    terms, rhs = parse_equation(equation, len(shapes))
    sizes, ellipses = {}, []
    for term, shape in zip(terms, shapes):
        head, dots, tail = term.partition("...")
        n_broadcast = len(shape) - len(head) - len(tail)
        if (not dots and n_broadcast) or n_broadcast < 0:
            raise ValueError(f"term '{term}' does not fit an operand of shape {list(shape)}")
        ellipses.append(tuple(shape[len(head):len(head) + n_broadcast]))
        named = list(shape[:len(head)]) + list(shape[len(shape) - len(tail):])
        for label, size in zip(head + tail, named):
            if sizes.setdefault(label, size) != size:
                if 1 not in (sizes[label], size):
                    raise ValueError(f"label '{label}' has sizes {sizes[label]} and {size}")
                sizes[label] = max(sizes[label], size)
    for label in rhs.replace(".", ""):
        if label not in sizes:
            raise ValueError(f"output label '{label}' is in no operand")
    head, _, tail = rhs.partition("...")
    middle = broadcast_shape(*ellipses) if "..." in rhs else ()
    return tuple(sizes[c] for c in head) + tuple(middle) + tuple(sizes[c] for c in tail)


@register_op("Einsum", layout=Layout.ANY)
class Einsum(OpSpec):
    attrs = {"equation": REQUIRED}

    @staticmethod
    def infer(ctx):
        try:
            shape = einsum_shape(ctx.arg("equation"), ctx.shapes)
        except ValueError as e:
            raise ValueError(f"Einsum '{ctx.op.name}': {e}") from None
        return [(shape, np.result_type(*ctx.dtypes))]


@kernel("Einsum", "cpu")
class EinsumCpu(Kernel):
    uses_blas = True

    def setup(self, ctx):
        terms, rhs = parse_equation(ctx.arg("equation"), len(ctx.input_shapes))
        self.equation = ",".join(terms) + "->" + rhs
        dtype = ctx.output_dtypes[0]
        self.consts = [None if c is None else np.asarray(c, dtype) for c in ctx.consts]
        # the cheapest contraction order depends only on the shapes: found once, here
        dummies = [np.empty(s, dtype) for s in ctx.input_shapes]
        self.path = np.einsum_path(self.equation, *dummies, optimize="optimal")[0] \
            if len(dummies) > 1 else False

    def run(self, inputs, outputs):
        ins = [c if c is not None else x for c, x in zip(self.consts, inputs)]
        np.copyto(outputs[0], np.einsum(self.equation, *ins, optimize=self.path), casting="unsafe")
