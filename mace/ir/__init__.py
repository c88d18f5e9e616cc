"""The in-memory model (`Graph`) and helpers over the protobuf IR."""
from mace.ir.graph import Graph  # noqa: F401
