"""The DspBackend interface: what a DSP runtime must do to run a quantized graph.

A backend is one class. `load` takes a converted, quantized Graph (uint8
activations, quantized weights; see mace/transform/passes/quantize.py); a run is
`set_inputs` -> `execute` -> `get_outputs`, with float inputs and outputs in the
graph's own layout (the graph's Quantize/Dequantize ops convert at the edges).
`node_costs` reports per-node cycles and estimated time where the backend knows
them (a simulator's cost model, a real DSP's counters); the default is none.

A backend that executes node by node on the host may expose that host Engine as
`engine`: `run --vlog_level 2`, `benchmark` and the observer API then see every
node, as on the CPU. A backend that runs the graph as one call leaves it None.

Backends are found by name (mace/runtime/dsp/registry.py): built-in ones, and
any package that declares one under the entry point group "pymace.dsp_backends".
"""
from __future__ import annotations

import abc
from dataclasses import dataclass


@dataclass
class NodeCost:
    """Per-node cycle and time information reported by a backend."""

    index: int              # position in the graph's execution order
    name: str               # IR op name
    type: str               # IR op type
    cycles: int             # total (estimated or measured) DSP cycles of one run of the node
    time_ms: float          # the same at the backend's clock
    macs: int = 0
    bytes_moved: int = 0    # bytes read (activations and weights) and written
    compute_cycles: int = 0
    memory_cycles: int = 0
    dispatch_cycles: int = 0


class DspBackend(abc.ABC):
    """Load a quantized graph, feed inputs, execute, read outputs (see the module doc)."""

    name = ""               # the name --dsp_backend / the .yml key dsp_backend selects
    description = ""        # one line for `run`'s notes
    engine = None           # a host Engine running node by node (observers hook into it), or None

    @abc.abstractmethod
    def load(self, graph, options: dict) -> None:
        """Prepare `graph` (a mace.ir.graph.Graph) for execution; called once."""

    @abc.abstractmethod
    def set_inputs(self, inputs: dict) -> None:
        """Stage input arrays (name -> ndarray) for the next `execute`."""

    @abc.abstractmethod
    def execute(self) -> None:
        """Run the graph once on the staged inputs."""

    @abc.abstractmethod
    def get_outputs(self) -> dict:
        """Output arrays of the last `execute` (name -> ndarray, fresh copies)."""

    def node_costs(self) -> list:
        """NodeCost per node in execution order; [] when the backend has no such information."""
        return []
