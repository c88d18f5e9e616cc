"""A frontend's table of framework op type -> mapping function.

Each frontend package owns one `MapperRegistry`; its `ops_*.py` modules register
mapping functions with the registry's decorator, and `load()` imports them all
(no hand-kept import list).
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable


class MapperRegistry:
    def __init__(self, package: str, what: str):
        self.package = package   # e.g. "mace.frontends.onnx"
        self.what = what         # how errors name an entry, e.g. "ONNX op"
        self.mappers: dict = {}
        self._loaded = False

    def register(self, *op_types: str) -> Callable:
        def wrap(fn):
            for t in op_types:
                if t in self.mappers:
                    raise ValueError(f"{self.what} {t} mapped twice")
                self.mappers[t] = fn
            return fn
        return wrap

    def load(self) -> dict:
        if not self._loaded:
            self._loaded = True
            pkg = importlib.import_module(self.package)
            for info in pkgutil.iter_modules(pkg.__path__):
                if info.name.startswith("ops_"):
                    importlib.import_module(f"{self.package}.{info.name}")
        return self.mappers
