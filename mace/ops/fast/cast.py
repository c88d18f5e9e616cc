"""Cast, fast CPU kernel: one np.copyto(casting="unsafe") from the input into the output. The
reference makes x.astype(to)'s fresh array and copies it: the same conversion (numpy's own cast
loop, truncation toward zero for float -> int), an allocation and a pass more.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._base import FastKernel
from mace.ops.registry import kernel


@kernel("Cast", "cpu:fast")
class CastFast(FastKernel):
    def bind(self, inputs, outputs, scratch=None):
        return partial(np.copyto, outputs[0], inputs[0], casting="unsafe")
