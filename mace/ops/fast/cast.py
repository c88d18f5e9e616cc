"""Cast, fast CPU kernel: np.copyto(casting="unsafe") from the input into the output, or for a
conversion to float32 / float64 (or from a bool) between contiguous tensors one compiled loop
(mace/ops/fast/_cast_loops.py: the same bytes, and a step a chain can call). The reference makes
x.astype(to)'s fresh array and copies it: the same conversion (numpy's own cast loop,
truncation toward zero for float -> int), an allocation and a pass more.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._jit import op_loops
from mace.ops.fast._base import FastKernel
from mace.ops.registry import kernel


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _exact(src: np.dtype, dst: np.dtype) -> bool:
    """Whether the compiled loop gives np.copyto's bytes for this conversion (float16 is
    numpy's alone: numba's support for it varies by version)."""
    if np.dtype(np.float16) in (src, dst) or src.kind not in "biuf":
        return False
    return dst in _FLOATS or (src.kind == "b" and dst.kind in "biu")


@kernel("Cast", "cpu:fast")
class CastFast(FastKernel):
    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        lib = op_loops("_cast_loops")
        if (lib is not None and _exact(x.dtype, out.dtype) and x.size == out.size
                and x.flags.c_contiguous and out.flags.c_contiguous):
            return partial(lib.cast_flat, x.reshape(-1), out.reshape(-1))
        return partial(np.copyto, out, x, casting="unsafe")
