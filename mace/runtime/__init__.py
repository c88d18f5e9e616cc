"""Runtimes: the engine that executes a converted Graph, and its memory planner."""
from mace.runtime.engine import Engine, create_engine  # noqa: F401
