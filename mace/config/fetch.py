"""Find a model file named by a deployment file: local path or http(s) URL, sha256-checked.

Relative local paths are looked up in the current directory (as MACE does),
then next to the deployment file. URLs are downloaded once into
builds/downloads/<md5 of URL><suffix>, only kept if the checksum matches.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from mace.errors import ChecksumError, ConfigError

DOWNLOAD_TIMEOUT_S = 60


def sha256_of(path: Path) -> str:
    """sha256 of a file; of a directory (a TensorFlow SavedModel), see sha256_of_dir."""
    if Path(path).is_dir():
        return sha256_of_dir(Path(path))
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
          allow_dir: bool = False) -> Path:
    """Return a local, checksum-verified path for a model/weight file reference
    (`allow_dir`: a local directory too, e.g. a TensorFlow SavedModel)."""
    if is_url(value):
        path = download_dir / (hashlib.md5(value.encode()).hexdigest() + Path(urlparse(value).path).suffix)
        if not (path.exists() and sha256 and sha256_of(path) == sha256):
            _download(value, path, yml, key_path)
        try:
            verify(path, sha256, key_path, yml)
        except (ChecksumError, ConfigError):
            path.unlink()  # never keep a download that is not the file asked for
            raise
        return path
    else:
        path = local_path(value, yml.parent)
        if not (path.is_file() or (allow_dir and path.is_dir())):
            raise ConfigError(f"{yml}: {key_path}: file not found: {value}")
    verify(path, sha256, key_path, yml)
    return path


def verify(path: Path, sha256: str | None, key_path: str, yml: Path) -> None:
    actual = sha256_of(path)
    checksum_key = key_path.replace("file_path", "sha256_checksum")
    if not sha256:
        raise ConfigError(f"{yml}: {checksum_key}: required; the sha256 of {path} is {actual}")
    if actual != sha256:
        raise ChecksumError(f"{yml}: {checksum_key}: sha256 mismatch for {path}\n"
                            f"  expected: {sha256}\n  actual:   {actual}\n"
                            f"refusing to convert a model that is not the one the deployment file names")


def _download(url: str, path: Path, yml: Path, key_path: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".download.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as r:
            for chunk in iter(lambda: r.read(1 << 20), b""):
                out.write(chunk)
        os.replace(tmp, path)
    except (OSError, ValueError, http.client.HTTPException) as e:  # ValueError: e.g. a bad port
        raise ConfigError(f"{yml}: {key_path}: cannot download {url}: {e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
