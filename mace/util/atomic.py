"""Write a file whole or not at all (a temporary file in the same folder, then a rename), with the
mode any other new file of the user's would get.

`tempfile.mkstemp` makes its file 0600 whatever the umask says: renamed into place as it is, a
build's .pb, .data and manifest were private while the .pb_txt and .html beside them were not.
Every atomic writer in the package goes through here, so one rule holds: 0666 (0777 for an
executable) less the umask, as `open()` would give.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def umask() -> int:
    """The process's umask, read without changing it where the OS says it (Linux's
    /proc/self/status); else set and restored at once."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(executable: bool = False) -> int:
    """The mode open() gives a new file (0o777 less the umask for an executable)."""
    return (0o777 if executable else 0o666) & ~umask()


def atomic_write(path, write, executable: bool = False, sync: bool = False) -> Path:
    """Call `write(f)` on a binary temporary file beside `path`, then rename it to `path`; on any
    failure (Ctrl-C included) the temporary file goes and `path` is as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, new_file_mode(executable))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path, data: bytes, sync: bool = False) -> Path:
    return atomic_write(path, lambda f: f.write(data), sync=sync)


def atomic_write_text(path, text: str, sync: bool = False) -> Path:
    return atomic_write_bytes(path, text.encode(), sync=sync)
