"""The DSP runtime (`runtime: dsp`): quantized models through a pluggable DspBackend.

    engine = create_dsp_engine("model.pb", "model.data", backend="hexagon_sim")
    outputs = engine.run({"input": array})
    engine.node_costs()     # NodeCost per node: estimated cycles and time

Pieces: backend.py (the DspBackend interface, NodeCost), registry.py (backends by
name: built-in, then the entry point group "pymace.dsp_backends"), simulator.py
(the default "hexagon_sim": int8 kernels on the host + cost_model.py), engine.py
(DspEngine, the Engine-like front `run` and `benchmark` use). See docs/dsp.md.
"""
from mace.runtime.dsp.backend import DspBackend, NodeCost  # noqa: F401
from mace.runtime.dsp.engine import DspEngine, backend_choice, create_dsp_engine  # noqa: F401
from mace.runtime.dsp.registry import (DEFAULT_BACKEND, ENTRY_POINT_GROUP, backend_class,  # noqa: F401
                                       backend_names)
