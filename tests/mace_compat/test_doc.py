"""docs/mace_compat.md is generated from the flag and key tables: it may not drift from them."""
from mace.cli import mace_flags
from mace.cli.mace_compat_doc import DOC, render


def test_committed_doc_is_the_generated_one():
    assert DOC.read_text() == render(), "run: python tools/gen_mace_compat_doc.py"


def test_doc_lists_every_flag_row():
    text = DOC.read_text()
    for f in mace_flags.FLAGS:
        assert f"| `{f.flag}`" in text
