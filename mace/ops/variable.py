"""ReadVariable / AssignVariable: state kept by the engine from one run to the next (TFLite's
resource variables: READ_VARIABLE, ASSIGN_VARIABLE, as streaming audio models carry their
buffers), and `Variables`, the engine's store of it.

ReadVariable (no inputs; args `variable`, `shape`, `dtype`) gives the variable's value at the
start of its step. AssignVariable (inputs: the new value, the initial value, and optionally the
ReadVariable output of the same variable, which orders the read before the write; no outputs)
stores the value for the next run. The initial value is what a fresh engine, and
`engine.reset_state()`, start from. AssignVariable has `side_effects`: no pass folds it or drops
it for having no readers. Layout ANY: the state keeps the framework's layout.
"""
from __future__ import annotations

import numpy as np

from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


class Variables:
    """Name -> current value, and the initial values a reset restores."""

    def __init__(self):
        self.values, self.initial = {}, {}

    def define(self, name: str, initial) -> None:
        if name not in self.initial:
            self.initial[name] = np.array(initial)
            self.values[name] = np.array(initial)

    def reset(self) -> None:
        for name, value in self.initial.items():
            np.copyto(self.values[name], value)


@register_op("ReadVariable", layout=Layout.ANY)
class ReadVariable(OpSpec):
    attrs = {"dtype": REQUIRED, "shape": REQUIRED, "variable": REQUIRED}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.arg("shape")), np.dtype(ctx.arg("dtype")))]


@register_op("AssignVariable", layout=Layout.ANY)
class AssignVariable(OpSpec):
    attrs = {"variable": REQUIRED}
    side_effects = True

    @staticmethod
    def infer(ctx):
        value, initial = ctx.shapes[0], ctx.shapes[1]
        if tuple(value) != tuple(initial):
            raise ValueError(f"AssignVariable '{ctx.op.name}': value shape {list(value)} differs from the "
                             f"variable's {list(initial)}")
        return []


def variable_store(ctx) -> Variables:
    """The engine's store of variables (ReadVariable, AssignVariable, StreamBuffer)."""
    if ctx.variables is None:
        raise ValueError(f"{ctx.op.type} '{ctx.op.name}' needs an engine that keeps variables")
    return ctx.variables


def defined_variable(ctx) -> tuple:
    """(the store, the variable's name) of a kernel that writes the variable, which it defines
    from its constant input 1, the initial value (AssignVariable, StreamBuffer)."""
    store, name = variable_store(ctx), ctx.arg("variable")
    if ctx.consts[1] is None:
        raise ValueError(f"{ctx.op.type} '{ctx.op.name}': the initial value must be a constant")
    store.define(name, ctx.consts[1])
    return store, name


@kernel("ReadVariable", "cpu")
class ReadVariableCpu(Kernel):
    def setup(self, ctx):
        self.store, self.name = variable_store(ctx), ctx.arg("variable")

    def run(self, inputs, outputs):
        np.copyto(outputs[0], self.store.values[self.name], casting="unsafe")


@kernel("AssignVariable", "cpu")
class AssignVariableCpu(Kernel):
    def setup(self, ctx):
        self.store, self.name = defined_variable(ctx)

    def run(self, inputs, outputs):
        np.copyto(self.store.values[self.name], inputs[0], casting="unsafe")
