"""The one place the CLI's rich Consoles are made.

On a terminal: its width (at least 160, so MACE-style tables keep their shape). Anywhere else (a
CI log, `| tee`, a file, a test's pipe) there is no width to fit: rich would assume 80 columns
and squeeze a table until its headers read `t… c… S… r…`, so the console is made as wide as any
line needs and every table prints whole: no column squeezed, no cell cut short (a column's
max_width and ellipsis are for a person at a terminal, not for a log someone greps).
"""
import shutil
import sys

from rich.console import Console
from rich.table import Table

MIN_WIDTH = 160
LOG_WIDTH = 100_000   # "unlimited": tables take their natural width, lines are never wrapped


class LogConsole(Console):
    """A Console for output that is not a terminal: tables at full width, cells uncut."""

    def print(self, *objects, **kwargs) -> None:
        drawn = []
        for obj in objects:
            if isinstance(obj, Table):
                _uncut(obj)
                if obj.row_count > FAST_ROWS and not kwargs:
                    obj = plain_table(obj) or obj
                    if isinstance(obj, str):   # drawn already: no markup left in it to read
                        self.file.write(obj + "\n")
                        continue
            drawn.append(obj)
        if drawn or not objects:
            super().print(*drawn, **kwargs)


def _uncut(table: Table) -> None:
    for column in table.columns:
        column.max_width = None
        column.overflow = "fold"
        column.no_wrap = False


def console(file=None) -> Console:
    out = file or sys.stdout
    if _is_terminal(out):
        width = shutil.get_terminal_size((MIN_WIDTH, 40)).columns
        return Console(file=file, soft_wrap=True, width=max(width, MIN_WIDTH), highlight=False)
    return LogConsole(file=file, soft_wrap=True, width=LOG_WIDTH, highlight=False)


def _is_terminal(out) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):   # a closed or unusual stream
        return False


# Past this many rows a table in a log is drawn by _plain_table: rich measures and renders every
# cell through its layout engine (~1 ms a cell on a busy 2-core machine), so `config` on a
# deployment file of 200 models (20,000 rows) took 40 s; the same characters, drawn directly, 0.1 s.
FAST_ROWS = 2000


def _plain_cells(table: Table):
    """[header, *rows] as plain strings, or None where a cell is not a string (a renderable)."""
    from rich.markup import render
    columns = []
    for column in table.columns:
        cells = list(column.cells)
        if not all(isinstance(c, str) for c in cells) or not isinstance(column.header, str):
            return None
        columns.append([render(c).plain if "[" in c else c for c in [column.header] + cells])
    return [list(row) for row in zip(*columns)]


def plain_table(table: Table) -> str | None:
    """The table as a LogConsole draws it (rich's heavy-head box, one space of padding, the title
    on the line above), or None where it has cells this cannot draw (renderables, cells over several lines)."""
    rows = _plain_cells(table)
    if rows is None or any("\n" in cell for row in rows for cell in row):
        return None
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(left, fill, mid, right):
        return left + mid.join(fill * (w + 2) for w in widths) + right

    def cells(edge, row):
        return edge + edge.join(f" {cell:<{w}} " for cell, w in zip(row, widths)) + edge

    out = [line("┏", "━", "┳", "┓"), cells("┃", rows[0]), line("┡", "━", "╇", "┩")]
    out += [cells("│", row) for row in rows[1:]]
    out.append(line("└", "─", "┴", "┘"))
    if table.title:
        title = table.title if isinstance(table.title, str) else str(table.title)
        from rich.markup import render
        out.insert(0, render(title).plain)
    return "\n".join(out)
