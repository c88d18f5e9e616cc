"""The DSP runtime (`runtime: dsp`): quantized models through a pluggable DspBackend.

    engine = create_dsp_engine("model.pb", "model.data", backend="hexagon_sim")
    outputs = engine.run({"input": array})
    engine.node_costs()     # NodeCost per node: estimated cycles and time

Pieces: backend.py (the DspBackend interface, NodeCost), registry.py (backends by
name: built-in, then the entry point group "pymace.dsp_backends"), simulator.py
(the default "hexagon_sim": int8 kernels on the host + cost_model.py), engine.py
(DspEngine, the Engine-like front `run` and `benchmark` use). See docs/dsp.md.

The public names (`from mace.runtime.dsp import DspBackend, NodeCost, create_dsp_engine`, what
backend plugins import) are looked up on first use (PEP 562), so the modules of this package
import each other without a cycle through this file.
"""
import importlib

_EXPORTS = {"DspBackend": "backend", "NodeCost": "backend", "DspEngine": "engine",
            "backend_choice": "engine", "create_dsp_engine": "engine", "DEFAULT_BACKEND": "registry",
            "ENTRY_POINT_GROUP": "registry", "backend_class": "registry", "backend_names": "registry"}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"mace.runtime.dsp.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'mace.runtime.dsp' has no attribute {name!r}")
