#!/usr/bin/env python3
"""MACE's tools/python/converter.py: here `python tools/converter.py` (docs/mace_compat.md, MACE's scripts)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the checkout's root

from mace.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
