"""fold_constants: evaluate ops whose inputs are all constant, with the reference kernels.

`Shape` ops fold from inferred shapes even though their input is not constant,
which is what turns ONNX's Shape/Gather/Concat/Reshape chains into plain args; not those of a
tensor whose length depends on the data (NonMaxSuppression's rows ...), which run with the
model (mark_ragged gives them the length).
Model outputs are never folded away.
"""
from __future__ import annotations

import functools

import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ir.graph import _copy_op
from mace.ops._common import NCHW_TO_NHWC, NHWC_TO_NCHW
from mace.ops.registry import InferContext, KernelContext, Layout, OpSpec, select_kernel, spec
from mace.ops.shape import _slice
from mace.transform.shape_inference import infer_shapes


def _evaluate(graph, op) -> list:
    if op.type == "Shape":  # needs only the inferred shape of its input
        return [_slice(lambda n, d=None: get_arg(op, n, d), graph.shape(op.input[0]))]
    ins = [np.asarray(graph.consts[t]) for t in op.input]
    if _needs_nhwc(op, ins):
        return _evaluate_nhwc(graph, op, ins)
    outs = [np.empty(graph.specs[t][0], graph.specs[t][1]) for t in op.output]
    return _run_kernel(op, ins, outs)


def _run_kernel(op, ins, outs) -> list:
    ctx = KernelContext(op=op, input_shapes=[x.shape for x in ins], input_dtypes=[x.dtype for x in ins],
                        output_shapes=[o.shape for o in outs], output_dtypes=[o.dtype for o in outs],
                        consts=ins)
    cls, _ = select_kernel(op.type, ["cpu"])
    cls(ctx).run(ins, outs)
    return outs


def _needs_nhwc(op, ins) -> bool:
    """FIXED-layout kernels run NHWC only; constant NCHW inputs are folded through NHWC."""
    return spec(op.type).layout == Layout.FIXED and get_arg(op, "data_format", "NHWC") == "NCHW" \
        and ins[0].ndim == 4


def _evaluate_nhwc(graph, op, ins) -> list:
    nhwc = _copy_op(op)
    set_arg(nhwc, "data_format", "NHWC")
    ins = [np.ascontiguousarray(ins[0].transpose(NCHW_TO_NHWC))] + ins[1:]
    shapes = spec(op.type).infer(InferContext(nhwc, [x.shape for x in ins], [x.dtype for x in ins], ins))
    outs = _run_kernel(nhwc, ins, [np.empty(s, d) for s, d in shapes])
    return [o.transpose(NHWC_TO_NCHW) if o.ndim == 4 else o for o in outs]


def is_foldable(graph, op) -> bool:
    if spec(op.type).side_effects:   # state for the next run (AssignVariable): it must run
        return False
    if op.type == "Shape":   # not of a tensor planned at a bound its data may not fill
        return op.input[0] in graph.consts or (op.input[0] in graph.specs
                                               and not shape_depends_on_data(graph, op.input[0]))
    return bool(op.input) and all(t in graph.consts for t in op.input)


def try_fold(graph, op) -> bool:
    """Replace `op`'s outputs by constants if its inputs allow; True if it did."""
    if not is_foldable(graph, op):
        return False
    for t, v in zip(op.output, _evaluate(graph, op)):
        graph.consts[t] = v
        graph.specs.pop(t, None)
    return True


def fold_constants(graph, options) -> bool:
    infer_shapes(graph)
    outputs = set(graph.output_names)
    keep = [op for op in graph.net.op if set(op.output) & outputs or not try_fold(graph, op)]
    changed = len(keep) != len(graph.net.op)
    if changed:
        graph.set_ops(keep)
    return changed


# ops whose output's shape is static even when they read a tensor planned at a bound: the shape
# vector itself, and a pad to a fixed row count (mace/ops/ragged_to_dense.py)
STATIC_SHAPED = {"Shape", "RaggedToDense"}


def shape_depends_on_data(graph, tensor: str) -> bool:
    """Whether `tensor`'s planned shape is only an upper bound: it is an output of an op whose
    length depends on the data (`OpSpec.ragged`) or comes from one through ops other than
    `Shape` and `RaggedToDense` (whose own outputs have static shapes). A `Shape` of such a
    tensor is not folded at convert: its value is known only when the model runs (mark_ragged
    gives it the length)."""
    if not any(_may_cut(op.type) for op in graph.net.op):
        return False
    bounded = set()
    for op in graph.net.op:   # in order: each op after those it reads
        own = spec(op.type).ragged(op)
        if own or (op.type not in STATIC_SHAPED and any(t in bounded for t in op.input)):
            bounded.update(t for i, t in enumerate(op.output) if i in own or not own)
        if tensor in op.output:
            return tensor in bounded
    return False


@functools.lru_cache(maxsize=None)
def _may_cut(op_type: str) -> bool:
    """Whether ops of this type can have outputs whose length depends on the data."""
    return spec(op_type).ragged is not OpSpec.ragged
