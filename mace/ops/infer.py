"""Shape inference of one op from the shapes its graph already knows: shared by the passes
(mace/transform/shape_inference.py, at convert) and the engine (mace/runtime/resize.py, when
an input changes shape at run time), so both read the ops' `infer` the same way."""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError
from mace.ops.registry import InferContext, spec


def infer_op(graph, op) -> None:
    """Infer and record (in graph.specs) the output shapes of one op whose inputs are known."""
    shapes, dtypes, values = [], [], []
    for t in op.input:
        if t in graph.consts:
            v = graph.consts[t]
            shapes.append(tuple(v.shape))
            dtypes.append(v.dtype)
            values.append(v)
        elif t in graph.specs:
            s, d = graph.specs[t]
            shapes.append(tuple(s))
            dtypes.append(np.dtype(d))
            values.append(None)
        else:
            raise ModelError(f"op '{op.name}' ({op.type}) reads tensor '{t}', "
                             f"which no op produces and is not a model input")
    try:
        outs = spec(op.type).infer(InferContext(op, shapes, dtypes, values))
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"shape inference failed at op '{op.name}' ({op.type}) "
                         f"with input shapes {[list(s) for s in shapes]}: {e}") from None
    for t, (shape, dtype) in zip(op.output, outs):
        graph.specs[t] = (tuple(int(d) for d in shape), np.dtype(dtype))
