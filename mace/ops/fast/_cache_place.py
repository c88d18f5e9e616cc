"""Where numba caches the compiled loops: beside their sources (`__pycache__`, numba's default) in
a source checkout, in the user's cache folder (numba's user-wide one, ~/.cache/numba) for an
installed wheel.

Why not beside an installed wheel's sources: `pip uninstall` removes the files it installed and
no others, so the cache files kept site-packages/mace/ops/fast/__pycache__ alive, a `mace` folder
without __init__.py: a namespace package that shadowed any later install (an editable checkout
then imported as an empty `mace`, `mace.__file__` None). A read-only site-packages already went
to the user-wide folder (numba's own fallback); now every installed wheel does. A cache folder
the user names (NUMBA_CACHE_DIR) still comes first.
"""
from __future__ import annotations

import functools
from pathlib import Path

from mace.util.invocation import checkout_root

PACKAGE = Path(__file__).resolve().parents[2]   # the `mace` package folder


def _numba(name: str):
    """numba's caching class `name` (numba < 0.62 spelled these with a leading underscore).
    numba is imported here, not with the module: the device runner's archive carries this file
    to boards without numba (mace/devices/runner_zip.py)."""
    from numba.core import caching
    return getattr(caching, name, None) or getattr(caching, "_" + name, None)


@functools.lru_cache(maxsize=None)
def _installed() -> bool:
    """Whether this `mace` is an installed wheel, not a checkout (read once: numba asks for every
    loop it decorates, and the answer is a read of pyproject.toml)."""
    return checkout_root() is None


@functools.lru_cache(maxsize=None)
def locator_class():
    """numba's user-wide locator, for this package's loop files when it is an installed wheel
    (made on first use: its base class is numba's)."""

    class InstalledWheelLocator(_numba("UserWideCacheLocator")):
        @classmethod
        def from_function(cls, py_func, py_file):
            if not _installed() or not Path(py_file).resolve().is_relative_to(PACKAGE):
                return None
            return super().from_function(py_func, py_file)
    return InstalledWheelLocator


def install() -> None:
    """Put the locator before numba's in-tree one (after a user-provided folder); idempotent.
    Called before any loop module is imported: numba picks a function's locator as it decorates."""
    classes, locator = _numba("CacheImpl")._locator_classes, locator_class()
    if locator not in classes:
        in_tree = _numba("InTreeCacheLocator")
        classes.insert(classes.index(in_tree) if in_tree in classes else 0, locator)
