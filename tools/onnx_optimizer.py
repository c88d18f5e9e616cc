#!/usr/bin/env python3
"""MACE's tools/onnx_optimizer.py: not needed here; this says what replaces it (docs/mace_compat.md, MACE's scripts)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the checkout's root

from mace.cli.mace_scripts import refuse  # noqa: E402

if __name__ == "__main__":
    sys.exit(refuse("tools/onnx_optimizer.py"))
