"""Resource variables, the state of streaming models (TensorFlow's tf.Variable exported with
`experimental_enable_resource_variables`): VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, and
CALL_ONCE, which runs an initialiser subgraph on the first invocation.

A variable is named by its VAR_HANDLE's `shared_name` (container/shared_name when a container is
set). Its initial value is read from the CALL_ONCE subgraph, which must only assign constants
(VAR_HANDLE + ASSIGN_VARIABLE of a constant: what TensorFlow writes for a variable's initial
value); anything else there is refused, naming the op. In the main subgraph, READ_VARIABLE
becomes the IR's ReadVariable and ASSIGN_VARIABLE its AssignVariable (mace/ops/variable.py): the
engine keeps the value from one run to the next, `engine.reset_state()` goes back to the
initial values. A READ_VARIABLE after an ASSIGN_VARIABLE of the same run is the value assigned
(so no op order between them needs keeping), only a variable's last ASSIGN_VARIABLE of a run
stores (an earlier one is seen by the reads between), and a variable the main subgraph never
assigns is a constant.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mace.errors import ModelError
from mace.frontends.tflite.registry import tfl_op


@dataclass
class VariableState:
    names: dict = field(default_factory=dict)     # handle tensor index (main subgraph) -> variable name
    initial: dict = field(default_factory=dict)   # variable name -> initial value
    assigned: set = field(default_factory=set)    # variables the main subgraph assigns
    last: dict = field(default_factory=dict)      # variable name -> index of its last ASSIGN_VARIABLE
    reads: dict = field(default_factory=dict)     # variable name -> its ReadVariable's IR output
    written: dict = field(default_factory=dict)   # variable name -> the IR tensor last assigned to it


def variable_name(op, path) -> str:
    opts = op.options
    shared = (opts.SharedName() or b"").decode() if opts is not None else ""
    container = (opts.Container() or b"").decode() if opts is not None else ""
    if not shared:
        raise ModelError(f"{path}: VAR_HANDLE '{op.name}' has no shared_name to name its variable")
    return f"{container}/{shared}" if container else shared


def _handles(ops, path) -> dict:
    return {op.outputs[0]: variable_name(op, path) for op in ops if op.type == "VAR_HANDLE" and op.outputs}


def read_state(model) -> VariableState:
    """The model's variables: their names, initial values (CALL_ONCE's subgraph), which are assigned."""
    state = VariableState(names=_handles(model.ops, model.path))
    for op in model.ops:
        if op.type == "CALL_ONCE":
            state.initial.update(_initial_values(model, op))
        elif op.type == "ASSIGN_VARIABLE" and op.inputs and op.inputs[0] in state.names:
            state.assigned.add(state.names[op.inputs[0]])
            state.last[state.names[op.inputs[0]]] = op.index
    return state


def _initial_values(model, call) -> dict:
    index = int(call.options.InitSubgraphIndex()) if call.options is not None else -1
    where = f"{model.path}: CALL_ONCE '{call.name}' (subgraph {index})"
    sub = model.others.get(index)
    if sub is None or isinstance(sub, str):
        raise ModelError(f"{where}: cannot read the initialiser subgraph ({sub or 'no such subgraph'})")
    tensors, ops = sub
    handles, values = _handles(ops, model.path), {}
    for op in ops:
        if op.type == "VAR_HANDLE":
            continue
        value = tensors[op.inputs[1]] if op.type == "ASSIGN_VARIABLE" and len(op.inputs) == 2 else None
        if value is None or value.data is None or op.inputs[0] not in handles:
            raise ModelError(f"{where}: op {op.type} '{op.name}': only constant initial values are "
                             f"supported (VAR_HANDLE and ASSIGN_VARIABLE of a constant)")
        values[handles[op.inputs[0]]] = np.asarray(value.real())
    return values


def _variable(ctx, op):
    state = ctx.state
    handle = op.inputs[0] if op.inputs else -1
    if handle not in state.names:
        raise ctx.fail(op, "its resource is not made by a VAR_HANDLE of this subgraph")
    name = state.names[handle]
    if name not in state.initial:
        raise ctx.fail(op, f"variable '{name}' has no initial value (no CALL_ONCE initialiser assigns it)")
    return name, state.initial[name]


@tfl_op("VAR_HANDLE")
def var_handle(ctx, op):
    """Nothing to compute: READ_VARIABLE / ASSIGN_VARIABLE name the variable through it."""


@tfl_op("READ_VARIABLE")
def read_variable(ctx, op):
    name, initial = _variable(ctx, op)
    if name not in ctx.state.assigned:   # never written: a constant
        ctx.add("Identity", op, [ctx.add_const(ctx.temp(op, "value"), initial)])
        return
    if name in ctx.state.written:   # read after this run's assignment: the value assigned
        ctx.alias(op, 0, ctx.state.written[name])
        return
    ctx.add("ReadVariable", op, [], variable=name, shape=list(initial.shape), dtype=initial.dtype.name)
    ctx.state.reads.setdefault(name, ctx.out(op))


@tfl_op("ASSIGN_VARIABLE")
def assign_variable(ctx, op):
    name, initial = _variable(ctx, op)
    value = ctx.inp(op, 1)
    ctx.state.written[name] = value
    if op.index != ctx.state.last[name]:   # overwritten later in the run: only reads see it
        return
    start = ctx.add_const(ctx.temp(op, "initial"), initial)
    order = [ctx.state.reads[name]] if name in ctx.state.reads else []   # the read runs first
    ctx.add("AssignVariable", op, [value, start, *order], [], name=ctx.temp(op, "assign"), variable=name)
