"""What a runtime backend provides, and the table of them: one entry per `runtime:` value.

Every engine a command gets (CPU, GPU, DSP) answers the same small interface,
so `run`, the reports, the observer API and the device runner never ask which
one they hold:

    engine.run(inputs) -> {output name: ndarray}     load happened in the factory
    engine.graph                                     the loaded Graph (IR)
    engine.input_specs() / output_specs()            name -> (shape, dtype)
    engine.nodes, engine.observers                   per-node hooks (mace/runtime/observer.py)
    engine.buffers, read_tensor(name), replace_const(name, value)

A backend is a factory `(pb_path, data_path, request) -> engine` registered here
under an engine kind; the runtimes it serves name that kind in their records
(mace/ir/runtimes.py). A fourth backend is one new folder under mace/runtime/,
its factory in FACTORIES and a Runtime record naming it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from mace.ir.runtimes import RUNTIMES
from mace.runtime.dsp import create_dsp_engine
from mace.runtime.engine import create_engine
from mace.runtime.from_code import create_engine_from_package


class EngineApi(Protocol):
    graph: object
    nodes: list
    observers: list

    def run(self, inputs: dict) -> dict: ...
    def input_specs(self) -> dict: ...
    def output_specs(self) -> dict: ...


@dataclass
class Request:
    """How to load: the engine's device and options, and for DSP the backend and where it was named."""
    device: str = "cpu"
    options: dict | None = None
    dsp_backend: str | None = None
    where: str = "--dsp_backend"
    code_package: Path | None = None      # model_graph_format: code: load the generated package
    model_name: str = ""
    notes: list = field(default_factory=list)


def _engine(pb_path, data_path, req: Request):
    if req.code_package is not None:   # as a deployment would: the generated package
        return create_engine_from_package(req.code_package, req.model_name, data_path,
                                          device=req.device, options=req.options)
    return create_engine(pb_path, data_path, device=req.device, options=req.options)


def _dsp(pb_path, data_path, req: Request):
    return create_dsp_engine(pb_path, data_path, req.dsp_backend, options=req.options, where=req.where)


# engine kind (Runtime.engine, mace/ir/runtimes.py) -> factory; runtime name -> factory
FACTORIES: dict[str, Callable] = {"engine": _engine, "dsp": _dsp}
BACKENDS: dict[str, Callable] = {n: FACTORIES[r.engine] for n, r in RUNTIMES.items() if r.available}


def load(runtime: str, pb_path, data_path, req: Request):
    try:
        factory = BACKENDS[runtime]
    except KeyError:
        raise ValueError(f"no runtime backend '{runtime}' (backends: {', '.join(BACKENDS)})") from None
    return factory(pb_path, data_path, req)
