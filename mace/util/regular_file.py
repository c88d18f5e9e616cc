"""Open only regular files, and read them up to a size limit.

A FIFO named where a file is expected would block `open()` until some writer comes, and
/dev/zero would be read until memory runs out: so a path is opened non-blocking, checked with
fstat on the open descriptor (no window for the path to change between check and use) and
refused unless it is a regular file. Limits have environment overrides for big files
(docs/reliability.md).
"""
from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

CONFIG_LIMIT_ENV = "MACE_MAX_CONFIG_BYTES"
CONFIG_LIMIT = 16 << 20         # a deployment or devices .yml: 16 MiB is far beyond any real one

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class NotRegularFile(OSError):
    """The path exists but is a FIFO, device, socket or directory."""


class TooLarge(OSError):
    """The file is larger than the limit for its kind."""


def byte_limit(env: str, default: int) -> int:
    """A size limit: `default`, or the environment's override in bytes (suffixes K, M, G allowed)."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(raw[-1].upper(), 1)
    try:
        value = int(raw[:-1] if scale > 1 else raw) * scale
    except ValueError:
        value = -1
    if value <= 0:
        raise ValueError(f"{env}={raw!r}: expected a positive number of bytes (e.g. 64M, 2G)")
    return value


def open_regular(path) -> BinaryIO:
    """A binary file object for `path`; NotRegularFile for anything but a regular file."""
    fd = os.open(Path(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
            raise NotRegularFile(errno.EINVAL, f"not a regular file: {kind}", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_limited(path, limit: int, env: str | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (`env` overrides the limit)."""
    with open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        how = f" (set {env} to allow more)" if env else ""
        raise TooLarge(errno.EFBIG, f"larger than {limit} bytes{how}", str(path))
    return data


def sha256_of_regular(path) -> str:
    """sha256 of a regular file, read in 1 MiB chunks; NotRegularFile for a FIFO, device, ..."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
