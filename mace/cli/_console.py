"""One rich Console for the CLI: wide enough for MACE-style tables when output is piped."""
import shutil

from rich.console import Console


def console() -> Console:
    width = shutil.get_terminal_size((160, 40)).columns
    return Console(soft_wrap=True, width=max(width, 160), highlight=False)
