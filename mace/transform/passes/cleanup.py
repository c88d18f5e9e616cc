"""Passes that remove what does not compute anything.

remove_identity: Identity ops (ONNX Identity/Dropout, TF Identity/StopGradient),
  Reshapes to the same shape and Casts to the same type (silero_vad's float32 -> float32,
  1-D conv exports) disappear; consumers read the input instead.
remove_dead_ops: ops whose outputs nobody reads (and are not model outputs),
  and constants nobody reads.
skip_integral_casts: a Cast back to float of a Cast to int32 / int64 of a rounded float
  (Eltwise ROUND / FLOOR / CEIL) reads the rounded float itself, and remove_identity then drops
  it (the int Cast goes too where nothing else reads it): the pair is the identity on integral
  values in the integer type's range. onnxruntime's ConvInteger, lowered to a float Conv
  (mace/frontends/onnx/ops_integer.py), is Round -> Cast int32 -> Cast float around every conv
  (ppocr_v2_cls quantize_dynamic: 106 Casts). Where they differ: a NaN or a value beyond the
  integer range (numpy casts those to the type's minimum on x86; a ConvInteger's exact sum is
  within int32 below 33025 taps of 8-bit operands) now stays as it is.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg
from mace.ir.qat_ranges import carry_range
from mace.ops.registry import spec


def _is_noop(graph, op) -> bool:
    if op.type == "Identity":
        return True
    if op.type == "Reshape" and op.input[0] in graph.specs and op.output[0] in graph.specs:
        return graph.shape(op.input[0]) == graph.shape(op.output[0])
    if op.type == "Cast" and op.input[0] in graph.specs and op.output[0] in graph.specs:
        return graph.dtype(op.input[0]) == graph.dtype(op.output[0])
    if op.type == "Transpose":
        dims = get_arg(op, "dims", [])
        return bool(dims) and list(dims) == sorted(dims)
    return False


def remove_identity(graph, options) -> bool:
    outputs = set(graph.output_names)
    inputs = set(graph.input_names)
    keep, changed = [], False
    for op in graph.net.op:
        if not _is_noop(graph, op):
            keep.append(op)
            continue
        src, dst = op.input[0], op.output[0]
        if dst in outputs and (src in outputs or src in inputs or src in graph.consts):
            keep.append(op)  # a model output must stay a distinct, produced tensor
            continue
        changed = True
        if dst in outputs:  # let the producer write the output name directly
            for other in graph.net.op:
                for i, t in enumerate(other.output):
                    if t == src:
                        other.output[i] = dst
            graph.rename_tensor(src, dst)
            _rename_in(keep, src, dst)
            carry_range(graph.net, src, dst)   # quantization-aware ranges follow the name
        else:
            graph.rename_tensor(dst, src)
            _rename_in(keep, dst, src)
            carry_range(graph.net, dst, src)
    if changed:
        graph.set_ops(o for o in keep)
    return changed


def _rename_in(ops, old, new):
    for op in ops:
        for i, t in enumerate(op.input):
            if t == old:
                op.input[i] = new


ROUNDING = ("ROUND", "FLOOR", "CEIL")
INTEGERS = (np.dtype(np.int32), np.dtype(np.int64))


def skip_integral_casts(graph, options) -> bool:
    producers, changed = graph.producers(), False
    for op in graph.net.op:
        back = _integral_source(graph, op, producers)
        if back is not None:
            op.input[0] = back   # now a Cast to its own type: remove_identity's
            changed = True
    return changed


def _integral_source(graph, op, producers):
    """The rounded float `op` (a Cast to float) gets back through a Cast to an integer, or None."""
    if op.type != "Cast" or op.input[0] not in graph.specs or op.output[0] not in graph.specs:
        return None
    to_int = producers.get(op.input[0])
    if to_int is None or to_int.type != "Cast" or graph.dtype(op.input[0]) not in INTEGERS:
        return None
    rounded = producers.get(to_int.input[0])
    if rounded is None or rounded.type != "Eltwise" or get_arg(rounded, "type", "") not in ROUNDING:
        return None
    source = to_int.input[0]
    return source if graph.dtype(source) == graph.dtype(op.output[0]) else None


def remove_dead_ops(graph, options) -> bool:
    needed = set(graph.output_names)
    live = []
    for op in reversed(list(graph.net.op)):
        if any(t in needed for t in op.output) or spec(op.type).side_effects:
            live.append(op)
            needed.update(op.input)
    live.reverse()
    changed = len(live) != len(graph.net.op)
    if changed:
        graph.set_ops(live)
    unused = [c for c in graph.consts if c not in needed]
    for c in unused:
        del graph.consts[c]
    return changed or bool(unused)
