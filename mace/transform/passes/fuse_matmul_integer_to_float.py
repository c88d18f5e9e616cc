"""fuse_matmul_integer_to_float: quantize_dynamic's MatMulInteger -> Cast(float32) -> Mul(scale)
(-> Add(bias)) becomes one `scaled` MatMulInteger (mace/ops/matmul_integer.py), the float output
written by its kernel (onnxruntime's graph optimizer makes the same chain its
MatMulIntegerToFloat).

Each of a quantized MiniLM's 18 MatMuls is that chain: three full passes over its output and
three node dispatches after the integer product (the Cast, the Mul by a_scale * b_scale, the
bias Add). The fused op computes float32(int32 sums) * scale + bias with the same float32
roundings, so the bytes are the unfused graph's. The scale may be a run-time tensor (the
product of DynamicQuantizeLinear's scale and the weight's) of one value or one per column; the
bias a float32 constant per column. Only for CPU float models (no GPU or int8 kernel reads it),
and only where the intermediate tensors have no other reader and are not model outputs.
"""
from __future__ import annotations

import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.transform.passes._patterns import eltwise, only_reader, other_input
from mace.transform.passes.fuse_hardswish import cpu_float
from mace.transform.passes.sort import sort_topologically
from mace.transform.shape_inference import infer_shapes


def _per_column(graph, name, n, allow_one) -> bool:
    """`name` is float32 and holds n values along the last axis (leading axes 1), or one."""
    shape = graph.shape(name)
    if shape is None or graph.dtype(name) is None or np.dtype(graph.dtype(name)) != np.float32:
        return False
    size = int(np.prod(shape, dtype=np.int64))
    return (allow_one and size == 1) or (size == n and len(shape) >= 1 and shape[-1] == n)


def _chain(graph, mmi, consumers, outputs):
    """(cast, mul, scale, add or None, bias or None) after `mmi`, or None."""
    out = mmi.output[0]
    shape = graph.shape(out)
    cast = only_reader(consumers, outputs, out)
    if shape is None or not shape or cast is None or cast.type != "Cast":
        return None
    if graph.dtype(cast.output[0]) is None or np.dtype(graph.dtype(cast.output[0])) != np.float32:
        return None
    mul = only_reader(consumers, outputs, cast.output[0])
    if not eltwise(mul, "PROD", plain=True) or list(mul.input).count(cast.output[0]) != 1:
        return None
    n, scale = shape[-1], other_input(mul, cast.output[0])
    if graph.shape(mul.output[0]) != shape or not _per_column(graph, scale, n, True):
        return None
    add = only_reader(consumers, outputs, mul.output[0])
    bias = other_input(add, mul.output[0]) if eltwise(add, "SUM", plain=True) and mul.output[0] in add.input else None
    if bias is None or bias not in graph.consts or graph.shape(add.output[0]) != shape \
            or not _per_column(graph, bias, n, False):
        add = bias = None
    return cast, mul, scale, add, bias


def fuse_matmul_integer_to_float(graph, options) -> bool:
    if not cpu_float(options):
        return False
    consumers, outputs = graph.consumers(), set(graph.output_names)
    removed = set()
    for mmi in graph.net.op:
        if mmi.type != "MatMulInteger" or get_arg(mmi, "scaled", 0) or len(mmi.output) != 1:
            continue
        chain = _chain(graph, mmi, consumers, outputs)
        if chain is None:
            continue
        cast, mul, scale, add, bias = chain
        mmi.input.append(scale)
        set_arg(mmi, "scaled", 1)
        if add is not None:
            mmi.input.append(bias)
            set_arg(mmi, "has_bias", 1)
        last = add or mul
        mmi.output[0] = last.output[0]
        for op in (cast, mul, add):
            if op is not None:
                mmi.framework_op.extend(op.framework_op)
                removed.add(op.name)
    if removed:
        graph.set_ops(op for op in graph.net.op if op.name not in removed)
        sort_topologically(graph, options)   # the scale's producer may have come after the product
        infer_shapes(graph)
    return bool(removed)
