#!/usr/bin/env python3
"""Write docs/ops.md from the op registry and the ONNX mappings."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mace.report.catalog import ops_markdown  # noqa: E402

if __name__ == "__main__":
    (ROOT / "docs" / "ops.md").write_text(ops_markdown())
    print("wrote docs/ops.md")
