"""The log console (mace/cli/_console.py: output that is not a terminal) draws a big table
itself: the same characters rich draws, without rich's per-cell layout work (`config` on a
deployment file of 200 models: 20,000 rows, 40 s through rich on a busy machine)."""
from __future__ import annotations

import io

from rich.table import Table

from mace.cli import _console


def _draw(table: Table, fast_rows: int, monkeypatch) -> str:
    monkeypatch.setattr(_console, "FAST_ROWS", fast_rows)
    out = io.StringIO()
    _console.console(out).print(table)
    return out.getvalue()


def _table(rows: int, title="Resolved configuration of d.yml") -> Table:
    t = Table(title=title)
    for c in ("key", "value", "from", "note"):
        t.add_column(c)
    for i in range(rows):
        t.add_row(f"models.m{i}.key_\\[{i % 7}]", '"x" ' * (i % 5), "file" if i % 3 else "default",
                  "carried; used by APU" if i % 11 == 0 else "")
    return t


def test_a_big_table_is_drawn_as_rich_draws_it(monkeypatch):
    table = _table(300)
    fast, slow = _draw(table, 10, monkeypatch), _draw(table, 10**9, monkeypatch)
    assert fast == slow and fast.count("\n") == 300 + 5 and "models.m299.key_[5]" in fast


def test_a_table_it_cannot_draw_goes_to_rich(monkeypatch):
    table = _table(30)
    table.add_row("multi", "line\nvalue", "file", "")
    assert _console.plain_table(table) is None
    assert "line" in _draw(table, 10, monkeypatch)
    untitled = _table(30, title=None)
    assert _draw(untitled, 10, monkeypatch) == _draw(untitled, 10**9, monkeypatch)
