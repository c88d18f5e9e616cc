"""Temporary files and folders named `<prefix><pid>.<random>` that a killed process left behind.

A command that writes through a temporary name (a download, convert's scratch folder) removes
it on every way out but SIGKILL; the next command of that kind removes those whose process is
gone, and leaves alone those of a process still running (a concurrent command).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or a number no pid can be
        return False
    except PermissionError:  # another user's process
        return True
    return True


def owner_gone(path: Path, prefix: str) -> bool:
    """Whether `path` is `<prefix><pid>.*` of a process that no longer runs."""
    pid = path.name[len(prefix):].split(".", 1)[0]
    return path.name.startswith(prefix) and pid.isdigit() and not alive(int(pid))


def remove_leftovers(folder: Path, prefix: str) -> None:
    """Remove the `<prefix><pid>.*` files and folders in `folder` whose process is gone."""
    for leftover in Path(folder).glob(f"{prefix}*"):
        if owner_gone(leftover, prefix):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
