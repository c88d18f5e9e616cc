"""Generated docs must match the code they describe."""
from pathlib import Path

from mace.report.catalog import ops_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_op_list_is_current():
    assert (ROOT / "docs" / "ops.md").read_text() == ops_markdown(), \
        "docs/ops.md is stale: run python tools/gen_op_docs.py"
