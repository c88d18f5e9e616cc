"""Select (ONNX Where), fast CPU kernel: y broadcast into the output, then x copied over it
where the condition holds, both np.copyto into views bound at load (any dtypes numpy casts
safely to the output's). The reference builds np.where's fresh array and copies it: an
allocation and a pass more, the same bytes. A condition that is not bool (a runtime float or
int tensor) stays with the reference, which casts it on every run.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import select as _reference
from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel
from mace.ops.registry import kernel


def bool_condition(ctx) -> str | None:
    if ctx.consts[0] is not None or np.dtype(ctx.input_dtypes[0]) == np.bool_:
        return None
    return f"condition is {np.dtype(ctx.input_dtypes[0])}, not bool"


@kernel("Select", "cpu:fast")
class SelectFast(FastKernel):
    check = staticmethod(bool_condition)

    def setup(self, ctx):
        self.cond = None if ctx.consts[0] is None else np.asarray(ctx.consts[0], np.bool_)

    def bind(self, inputs, outputs, scratch=None):
        cond = self.cond if self.cond is not None else inputs[0]
        out = outputs[0]
        if np.shares_memory(out, inputs[1]) or np.shares_memory(out, cond):   # y would overwrite them
            return _reference.SelectCpu(self.ctx).bind(inputs, outputs)
        return sequence([partial(np.copyto, out, inputs[2], casting="unsafe"),
                         partial(np.copyto, out, inputs[1], casting="unsafe", where=cond)])
