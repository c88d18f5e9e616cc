#!/usr/bin/env python3
"""MACE-style converter CLI: convert | run | config. See `python tools/converter.py -h`."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from a checkout

from mace.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
