"""Finding DSP backends by name: the built-in ones, then Python entry points.

A package provides a backend by declaring, in its pyproject.toml,

    [project.entry-points."pymace.dsp_backends"]
    my_dsp = "my_package.module:MyBackend"      # a DspBackend subclass

Installed (or only present on sys.path as a `*.dist-info` with that
entry_points.txt), `--dsp_backend my_dsp` or the .yml key `dsp_backend: my_dsp`
selects it. Entry points are read through importlib.metadata each time a name is
looked up, so a package added to sys.path at run time is seen. Built-in names win
over an entry point of the same name.
"""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from mace.errors import ConfigError
from mace.runtime.dsp.backend import DspBackend

ENTRY_POINT_GROUP = "pymace.dsp_backends"
DEFAULT_BACKEND = "hexagon_sim"
# name -> "module:class" of the backends shipped with pymace (imported when chosen)
BUILTIN = {"hexagon_sim": "mace.runtime.dsp.simulator:HexagonSimulator"}


def _plugins() -> dict:
    """name -> EntryPoint of every installed backend not shadowed by a built-in one."""
    found = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in BUILTIN:
            found.setdefault(ep.name, ep)  # the first on sys.path wins, as for imports
    return found


def backend_names() -> list:
    """Every backend name that can be chosen, built-in first."""
    return list(BUILTIN) + sorted(_plugins())


def backend_class(name: str | None = None, where: str = "--dsp_backend") -> type:
    """The DspBackend subclass called `name` (default hexagon_sim); `where` names the flag or
    .yml key it came from in the error for an unknown or broken backend."""
    name = name or DEFAULT_BACKEND
    plugins = _plugins()
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        cls = getattr(importlib.import_module(module), attr)
    elif name in plugins:
        cls = _load(plugins[name], where)
    else:
        available = ", ".join(list(BUILTIN) + sorted(plugins))
        raise ConfigError(f"{where}: unknown DSP backend '{name}'; available: {available} "
                          f"(more through the entry point group {ENTRY_POINT_GROUP}, docs/dsp.md)")
    if not (isinstance(cls, type) and issubclass(cls, DspBackend)):
        raise ConfigError(f"{where}: DSP backend '{name}' ({_origin(plugins.get(name))}) is not a "
                          f"mace.runtime.dsp.DspBackend subclass")
    return cls


def _load(ep, where: str):
    try:
        return ep.load()
    except Exception as e:  # a broken plugin: say which one, not a traceback
        raise ConfigError(f"{where}: DSP backend '{ep.name}' ({_origin(ep)}) cannot be loaded: "
                          f"{type(e).__name__}: {e}") from None


def _origin(ep) -> str:
    if ep is None:
        return "built-in"
    dist = getattr(ep, "dist", None)
    return f"{ep.value} from {dist.name}" if dist is not None else ep.value
