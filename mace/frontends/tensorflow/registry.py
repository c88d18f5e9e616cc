"""TensorFlow op type -> mapping function. Each ops_*.py module registers with @tf_op."""
from __future__ import annotations

from typing import Callable

MAPPERS: dict = {}


def tf_op(*op_types: str) -> Callable:
    def wrap(fn):
        for t in op_types:
            if t in MAPPERS:
                raise ValueError(f"TensorFlow op {t} mapped twice")
            MAPPERS[t] = fn
        return fn
    return wrap


def load_mappers() -> dict:
    import importlib
    import pkgutil

    import mace.frontends.tensorflow as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("ops_"):
            importlib.import_module(f"mace.frontends.tensorflow.{info.name}")
    return MAPPERS
