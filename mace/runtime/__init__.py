"""Runtimes: the engine that executes a converted Graph, and its memory planner.

`from mace.runtime import create_engine, Engine` is the public API (README). The names are
looked up on first use (PEP 562) rather than imported here, so importing any
mace.runtime.* module does not load the engine first (no import cycle through this file).
"""
import importlib

_EXPORTS = {"Engine": "mace.runtime.engine", "create_engine": "mace.runtime.engine",
            "open_engine": "mace.runtime.open"}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'mace.runtime' has no attribute {name!r}")
