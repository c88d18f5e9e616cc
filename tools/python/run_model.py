#!/usr/bin/env python3
"""MACE's tools/python/run_model.py: here `python tools/converter.py run`, MACE's flags translated (docs/mace_compat.md, MACE's scripts)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the checkout's root

from mace.cli.mace_scripts import run_each, run_model_argv  # noqa: E402
from mace.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_each(main, run_model_argv(sys.argv[1:])))
