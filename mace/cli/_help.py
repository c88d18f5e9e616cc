"""`-h` for every command: each option's default said once, and the program named as the user ran it."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# A help text that already gives its default: "(default builds/<library>/)", "; default: the .yml's".
STATES_DEFAULT = re.compile(r"[(;]\s*default\b")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's `(default: X)` only where it says something: not after a help that gives its
    default in words, not `(default: None)` for an option that is simply off unless given, not
    `(default: False)` for an on/off flag."""

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        if action.default is None or action.nargs == 0 or STATES_DEFAULT.search(text):
            return text
        return super()._get_help_string(action)


def prog_name(argv0: str | None = None) -> str:
    """What `usage:` calls us: the name the user ran (`converter.py` for tools/converter.py,
    `mace-converter` for the installed script); `converter.py` when started some other way."""
    name = Path(sys.argv[0] if argv0 is None and sys.argv else argv0 or "").name
    return name if name and name not in ("main.py", "__main__.py", "-c") else "converter.py"
