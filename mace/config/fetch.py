"""Find a model file named by a deployment file: local path or http(s) URL, sha256-checked.

Relative local paths are looked up in the current directory (as MACE does),
then next to the deployment file. URLs are downloaded once into
builds/downloads/<md5 of URL><suffix>, only kept if the checksum matches.

A download is bounded: at most MACE_MAX_DOWNLOAD_BYTES (default 4 GiB; a larger Content-Length
is refused before reading), within MACE_DOWNLOAD_DEADLINE_S seconds in all (default 1800) and
DOWNLOAD_TIMEOUT_S without a byte. It goes to builds/downloads/.download.<pid>.*, removed on
every error; one a killed process left is removed by the next download into the folder.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from mace.errors import ChecksumError, ConfigError
from mace.util.atomic import new_file_mode
from mace.util.env_limits import positive_env
from mace.util.leftovers import remove_leftovers
from mace.util.regular_file import byte_limit, sha256_of_regular

DOWNLOAD_TIMEOUT_S = 60               # without a byte from the server
DOWNLOAD_LIMIT_ENV, DOWNLOAD_LIMIT = "MACE_MAX_DOWNLOAD_BYTES", 4 << 30
DEADLINE_ENV, DEADLINE_S = "MACE_DOWNLOAD_DEADLINE_S", 1800.0
PARTIAL = ".download."


def sha256_of(path: Path) -> str:
    """sha256 of a file; of a directory (a TensorFlow SavedModel), see sha256_of_dir."""
    if Path(path).is_dir():
        return sha256_of_dir(Path(path))
    return sha256_of_regular(path)   # a FIFO or /dev/zero is refused, never read


def sha256_of_dir(path: Path) -> str:
    """sha256 over every file of a directory, what this shell line prints:
    `cd DIR && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum`."""
    files = sorted(((f"./{p.relative_to(path).as_posix()}", p) for p in path.rglob("*")
                    if p.is_file() and not p.is_symlink()), key=lambda item: item[0].encode())
    listing = "".join(f"{sha256_of(p)}  {name}\n" for name, p in files)
    return hashlib.sha256(listing.encode()).hexdigest()


def is_url(value: str) -> bool:
    return urlparse(value).scheme in ("http", "https")


def local_path(value: str, base_dir: Path) -> Path:
    p = Path(value).expanduser()
    if p.is_absolute() or p.exists():
        return p
    beside = base_dir / p
    return beside if beside.exists() else p


def fetch(value: str, sha256: str | None, key_path: str, yml: Path, download_dir: Path,
          allow_dir: bool = False, checksum_key: str | None = None) -> Path:
    """Return a local, checksum-verified path for a model/weight file reference
    (`allow_dir`: a local directory too, e.g. a TensorFlow SavedModel; `checksum_key`: the key
    that holds `sha256`, default the file key with file_path -> sha256_checksum)."""
    checksum_key = checksum_key or key_path.replace("file_path", "sha256_checksum")
    if is_url(value):
        path = download_dir / (hashlib.md5(value.encode()).hexdigest() + Path(urlparse(value).path).suffix)
        if not (sha256 and _cached_sha(path) == sha256):
            _download(value, path, yml, key_path)
        try:
            verify(path, sha256, checksum_key, yml)
        except (ChecksumError, ConfigError):
            path.unlink()  # never keep a download that is not the file asked for
            raise
        return path
    else:
        path = local_path(value, yml.parent)
        if not (path.is_file() or (allow_dir and path.is_dir())):
            what = "not a regular file" if path.exists() else "file not found"  # a FIFO would block
            raise ConfigError(f"{yml}: {key_path}: {what}: {value}")
    verify(path, sha256, checksum_key, yml)
    return path


def _cached_sha(path: Path) -> str | None:
    """sha256 of a download kept from an earlier run; None when absent or not a regular file
    (a FIFO or a link to /dev/zero put in the cache: the download replaces it)."""
    try:
        return sha256_of_regular(path)
    except OSError:
        return None


def verify(path: Path, sha256: str | None, checksum_key: str, yml: Path) -> None:
    try:
        actual = sha256_of(path)
    except OSError as e:   # replaced by a FIFO or a device since it was looked at
        raise ConfigError(f"{yml}: {checksum_key.replace('sha256_checksum', 'file_path')}: "
                          f"cannot read {path} ({e.strerror})") from None
    if not sha256:
        raise ConfigError(f"{yml}: {checksum_key}: required; the sha256 of {path} is {actual}")
    if actual != sha256:
        raise ChecksumError(f"{yml}: {checksum_key}: sha256 mismatch for {path}\n"
                            f"  expected: {sha256}\n  actual:   {actual}\n"
                            f"refusing to use a file that is not the one the deployment file names")


def _download(url: str, path: Path, yml: Path, key_path: str) -> None:
    where = f"{yml}: {key_path}: cannot download {url}"
    try:
        limit = byte_limit(DOWNLOAD_LIMIT_ENV, DOWNLOAD_LIMIT)
        deadline = _deadline()
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path.parent, PARTIAL)
    fd, tmp = tempfile.mkstemp(prefix=f"{PARTIAL}{os.getpid()}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            _copy(url, out, limit, deadline)
        os.chmod(tmp, new_file_mode())   # mkstemp's 0600 otherwise: the umask's rule, as every file we write
        os.replace(tmp, path)
    except (OSError, ValueError, http.client.HTTPException) as e:  # ValueError: e.g. a bad port
        raise ConfigError(f"{where}: {e}") from None
    finally:  # every way out, Ctrl-C included (SIGKILL: remove_leftovers, next time)
        if os.path.exists(tmp):
            os.unlink(tmp)


class DownloadLimit(OSError):
    """The download broke its size limit or its deadline; str() says which and how to allow more."""

    def __str__(self):
        return self.args[0]


def _deadline() -> float:
    return positive_env(DEADLINE_ENV, DEADLINE_S, unit="seconds")


def _copy(url: str, out, limit: int, seconds: float) -> None:
    """Stream the body into `out`: read1() returns what has arrived, so a server trickling bytes
    meets the overall deadline, not only the per-read timeout (a plain read(n) waits for n)."""
    end = time.monotonic() + seconds
    with urllib.request.urlopen(url, timeout=min(DOWNLOAD_TIMEOUT_S, seconds)) as r:
        size = r.headers.get("Content-Length", "")
        if size.isdigit() and int(size) > limit:
            raise DownloadLimit(f"the server announces {int(size)} bytes, more than the limit of {limit} "
                                f"(set {DOWNLOAD_LIMIT_ENV} to allow more)")
        done = 0
        while chunk := r.read1(1 << 20):
            done += len(chunk)
            if done > limit:
                raise DownloadLimit(f"more than {limit} bytes (set {DOWNLOAD_LIMIT_ENV} to allow more)")
            out.write(chunk)
            if time.monotonic() > end:
                raise DownloadLimit(f"not finished after {seconds:g} s ({done} bytes so far; set "
                                    f"{DEADLINE_ENV} to allow more time)")
