#!/usr/bin/env python3
"""Regenerate docs/mace_compat.md from the flag and key tables (mace/cli/mace_compat_doc.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mace.cli.mace_compat_doc import write  # noqa: E402

if __name__ == "__main__":
    print(f"wrote {write()}")
