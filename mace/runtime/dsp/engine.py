"""DspEngine: what `run`, `benchmark` and the observer API see for `runtime: dsp`.

It puts the Engine interface (run, graph, nodes, observers, input_specs, ...)
in front of a DspBackend. A run is backend.set_inputs -> execute -> get_outputs.
Node-level hooks (observers, the profiler, tensor reads, weight replacement) go
to the backend's host engine when it has one (the simulator does); a backend
that runs the graph in one call has no nodes to observe, and `node_costs()`
is all the per-node information there is.
"""
from __future__ import annotations

from pathlib import Path

from mace.errors import ModelError, UnsupportedOpError
from mace.ir.graph import Graph
from mace.ir.model_io import load_model
from mace.runtime.resize import check_recorded_shapes
from mace.runtime.dsp.registry import DEFAULT_BACKEND, backend_class


class DspEngine:
    device = "dsp"

    def __init__(self, graph: Graph, backend: str | None = None, options: dict | None = None,
                 where: str = "--dsp_backend"):
        self.graph = graph
        self.options = dict(options or {})
        self.backend_name = backend or DEFAULT_BACKEND
        self.backend = backend_class(self.backend_name, where)()
        try:
            self.backend.load(graph, self.options)
        except UnsupportedOpError as e:  # e.g. a model converted for another runtime
            raise ModelError(f"DSP backend '{self.backend_name}' cannot load the model: {e} "
                             f"(convert it with runtime: dsp)") from None
        host = self.backend.engine
        self.nodes = host.nodes if host is not None else []
        self.observers = host.observers if host is not None else []  # the list the host engine calls

    def run(self, inputs: dict) -> dict:
        self.backend.set_inputs(inputs)
        self.backend.execute()
        return self.backend.get_outputs()

    def node_costs(self) -> list:
        """mace.runtime.dsp.backend.NodeCost per node (estimated or measured cycles), or []."""
        return self.backend.node_costs()

    def describe(self) -> str:
        text = self.backend.description or type(self.backend).__name__
        return f"runtime dsp: backend {self.backend_name} ({text})"

    # ---- the Engine interface the report tools and the observer API use --------------
    def input_specs(self) -> dict:
        return {n: self.graph.specs[n] for n in self.graph.input_names}

    def output_specs(self) -> dict:
        return {n: self.graph.specs[n] for n in self.graph.output_names}

    def _host(self, what: str):
        host = self.backend.engine
        if host is None:
            raise ModelError(f"DSP backend '{self.backend_name}' runs the graph as one call: "
                             f"{what} is not available")
        return host

    def read_tensor(self, name: str):
        return self._host(f"reading tensor '{name}'").buffers[name]

    def replace_const(self, name: str, value) -> list:
        return self._host(f"replacing weight '{name}'").replace_const(name, value)

    @property
    def buffers(self) -> dict:
        host = self.backend.engine
        return host.buffers if host is not None else {}

    @property
    def plan(self):
        return self._host("the memory plan").plan

    @property
    def scratch(self):
        host = self.backend.engine
        return host.scratch if host is not None else None


def create_dsp_engine(pb_path, data_path=None, backend: str | None = None, options: dict | None = None,
                      where: str = "--dsp_backend") -> DspEngine:
    """Load a model converted with runtime: dsp (.pb + .data) on the named backend."""
    graph = load_model(Path(pb_path), Path(data_path) if data_path else None)
    check_recorded_shapes(graph, pb_path)
    return DspEngine(graph, backend, options, where)


def backend_choice(config, sg) -> tuple:
    """(backend name or None, where it was set) for a subgraph: --dsp_backend or the .yml key."""
    name = sg.values.get("dsp_backend")
    if sg.origin.get("dsp_backend") == "--dsp_backend":
        return name, "--dsp_backend"
    return name, f"{config.path}: {sg.key_path}.dsp_backend"
