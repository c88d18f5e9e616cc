"""Build an Engine from a model generated as Python code (`model_graph_format: code`).

A generated graph module (builds/<library>/code/<library>_models/<model>.py) holds
the NetDef as protobuf constructor calls and its constant-tensor table; the
weights are either a base64 literal in `_weights/<model>.py` (model_data_format:
code) or the `.data` file, memory-mapped (model_data_format: file). Only the
runtime is needed here (mace.runtime, mace.ir, mace.ops, mace.proto, numpy,
protobuf): generated packages import this module, never the converter.
"""
from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import numpy as np

from mace.errors import ModelError
from mace.ir.checks import check_net
from mace.ir.dtypes import to_numpy
from mace.ir.graph import Graph
from mace.ir.model_io import graph_from_net
from mace.runtime.resize import check_recorded_shapes
from mace.runtime.engine import Engine
from mace.util.aligned import aligned_empty



def engine_from_module(module, data_path=None, device: str = "cpu", options: dict | None = None) -> Engine:
    """Engine for a generated graph module; `data_path` overrides where its .data file is."""
    return Engine(graph_from_module(module, data_path), device=device, options=options)


def graph_from_module(module, data_path=None) -> Graph:
    net = module.build_net()
    if module.WEIGHTS == "code":
        weights = importlib.import_module(f"{module.__package__}._weights.{module.__name__.rpartition('.')[2]}")
        blob = _aligned(base64.b64decode(weights.DATA))
    else:
        blob = _memmap(Path(data_path) if data_path else default_data_path(module), net.data_size)
    check_net(net, blob.size, module.__name__)   # the same checks as a .pb's (mace/ir/checks.py)
    consts = {t.name: blob[t.offset:t.offset + t.data_size].view(to_numpy(t.data_type)).reshape(tuple(t.dims))
              for t in net.tensors}
    graph = graph_from_net(net, consts)
    check_recorded_shapes(graph, module.__name__)
    return graph


def default_data_path(module) -> Path:
    """<model>.data beside the package, else in builds/<library>/model/ where convert put it."""
    here = Path(module.__file__).resolve().parent
    for candidate in (here / module.DATA_FILE, here.parent.parent / "model" / module.DATA_FILE):
        if candidate.exists():
            return candidate
    raise ModelError(f"{module.__name__}: model data file {module.DATA_FILE} not found beside the package "
                     f"or in ../../model/; pass data_path=")


def _aligned(raw: bytes) -> np.ndarray:
    """A read-only 64-byte aligned copy (kernels expect aligned weights, as from the memmap)."""
    out = aligned_empty(len(raw))
    out[:] = np.frombuffer(raw, np.uint8)
    out.flags.writeable = False
    return out


def _memmap(path: Path, size: int) -> np.ndarray:
    if not path.exists():
        raise ModelError(f"{path}: model data file is missing")
    return np.memmap(path, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Loads a generated module from its .py source alone: no .pyc is read or written.

    The build manifest covers the package's .py files; a .pyc planted in __pycache__ (with a
    header matching the source's size and time) would otherwise run in their place."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)

    def set_data(self, path, data, *, _mode=0o666):
        pass   # never write bytecode beside a build


def _source_only(folder: Path) -> None:
    """Submodules under `folder` are found by a finder that knows .py files and SourceOnlyLoader only."""
    sys.path_importer_cache[str(folder)] = importlib.machinery.FileFinder(
        str(folder), (SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES))


def load_package(package_dir):
    """Import a generated package from its folder, fresh (a convert in this process may have
    rewritten it), under a name unique to the folder so two libraries never mix; from source
    only (SourceOnlyLoader)."""
    package_dir = Path(package_dir).resolve()
    name = f"{package_dir.name}_{hashlib.md5(str(package_dir).encode()).hexdigest()[:8]}"
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    init = package_dir / "__init__.py"
    if not init.exists():
        raise ModelError(f"{package_dir}: no generated model package here (run convert first)")
    for folder in (package_dir, package_dir / "_weights"):
        _source_only(folder)
    spec = importlib.util.spec_from_file_location(name, init, loader=SourceOnlyLoader(name, str(init)),
                                                  submodule_search_locations=[str(package_dir)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def create_engine_from_package(package_dir, model: str, data_path=None, device: str = "cpu",
                               options: dict | None = None) -> Engine:
    """What `run` does for model_graph_format: code: load the generated package, ask its factory."""
    package = load_package(package_dir)
    modules = getattr(package, "MODULES", {m: m for m in package.MODELS})   # older packages: no map
    if model not in modules or not (Path(package_dir) / f"{modules[model]}.py").exists():
        raise ModelError(f"{package_dir}: no generated code for model '{model}' (run convert again)")
    return package.create_engine_from_code(model, data_path=data_path, device=device, options=options)
