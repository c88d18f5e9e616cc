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
        for obj in objects:
            if isinstance(obj, Table):
                _uncut(obj)
        super().print(*objects, **kwargs)


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
