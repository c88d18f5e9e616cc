"""Intermediate tensors, read through the observer API: capture in memory or dump as .npy.

`run --dump_tensors DIR` writes DIR/<model>/NNNN_<tensor>.npy for every output
of every node (NNNN = the node's index in execution order; TIDL's trace dumps)
and DIR/<model>/tensors.csv saying which op wrote each file, its shape, and the
permutation from the framework's layout to the stored one (4-D activations are
stored NHWC: `np.load(f).transpose(argsort(perm))` gives the framework's layout).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mace.config.files import safe_name
from mace.ir.layouts import stored_perms
from mace.runtime.observer import Event, register, unregister


def capture_outputs(engine, inputs: dict, names=None) -> tuple:
    """Run once; returns (outputs, {tensor: copy of its value right after the node that wrote it}).

    `names` limits what is kept (default: every node output)."""
    wanted = None if names is None else set(names)
    values = {}

    def keep(flags, node):
        for t in node.outputs:
            if wanted is None or t.name in wanted:
                values[t.name] = np.array(t.data)  # copy: the arena is reused by later nodes

    handle = register(engine, keep, Event.AFTER)
    try:
        outputs = engine.run(inputs)
    finally:
        unregister(engine, handle)
    return outputs, values


@dataclass
class DumpedTensor:
    index: int
    op: str
    type: str
    tensor: str
    file: str
    shape: list
    dtype: str
    perm: list          # framework layout -> stored layout ([] when stored as the framework has it)


def dump_tensors(engine, inputs: dict, directory) -> list:
    """Run once, writing every node output to `directory` (see the module docstring)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    perms = stored_perms(engine.graph.net)
    dumped = []

    def save(flags, node):
        for t in node.outputs:
            name = f"{node.index:04d}_{safe_name(t.name)}.npy"
            np.save(directory / name, np.asarray(t.data))
            dumped.append(DumpedTensor(node.index, node.name, node.type, t.name, name, list(t.shape),
                                       np.dtype(t.dtype).name, list(perms.get(t.name, ()))))

    handle = register(engine, save, Event.AFTER)
    try:
        engine.run(inputs)
    finally:
        unregister(engine, handle)
    with open(directory / "tensors.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["index", "op", "type", "tensor", "file", "shape", "dtype", "perm"])
        for d in dumped:
            w.writerow([d.index, d.op, d.type, d.tensor, d.file, "x".join(map(str, d.shape)), d.dtype,
                        ",".join(map(str, d.perm))])
    return dumped
