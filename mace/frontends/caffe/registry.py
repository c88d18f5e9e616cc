"""Caffe layer type -> mapping function. Each ops_*.py module registers with @caffe_layer."""
from __future__ import annotations

from typing import Callable

MAPPERS: dict = {}


def caffe_layer(*layer_types: str) -> Callable:
    def wrap(fn):
        for t in layer_types:
            if t in MAPPERS:
                raise ValueError(f"Caffe layer type {t} mapped twice")
            MAPPERS[t] = fn
        return fn
    return wrap


def load_mappers() -> dict:
    import importlib
    import pkgutil

    import mace.frontends.caffe as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("ops_"):
            importlib.import_module(f"mace.frontends.caffe.{info.name}")
    return MAPPERS
