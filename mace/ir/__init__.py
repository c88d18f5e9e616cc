"""The in-memory model (`Graph`) and helpers over the protobuf IR.

`from mace.ir import Graph` is looked up on first use (PEP 562): importing a light module of this
package (mace.ir.runtimes, which the device runner reads before numpy loads) does not load numpy.
"""
import importlib


def __getattr__(name):
    if name == "Graph":
        return importlib.import_module("mace.ir.graph").Graph
    raise AttributeError(f"module 'mace.ir' has no attribute {name!r}")
