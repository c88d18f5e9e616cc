#!/usr/bin/env python3
"""MACE's mace/python/tools/quantization/quantize_stat.py: here `python tools/quantize_stat.py`, the same flags (docs/mace_compat.md, MACE's scripts)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4]))  # the checkout's root

from mace.cli.quantize_stat_cmd import tool_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(tool_main())
