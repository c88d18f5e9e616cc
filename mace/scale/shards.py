"""Shards of a sample loop and the folder that keeps their results, so a run can resume.

A shard is a run of consecutive batches ([start, end) sample ranges). Its result is saved as
`shard_<index>.npz` (arrays only: no pickle is ever loaded back) next to a `manifest.json`
holding the fingerprint of what produced it (model files, script, sizes) and the sha256 of
each shard saved (a shard that does not match is run again, never resumed). A folder whose
fingerprint differs was made by another build or script: it is emptied, never mixed in.
Writes go to a temporary file first and are renamed into place, so a worker or driver that
dies mid-write leaves no half shard behind.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mace.util.atomic import atomic_write, atomic_write_text
from mace.util.regular_file import open_regular, read_limited, sha256_of_regular

MANIFEST = "manifest.json"
MANIFEST_LIMIT = 64 << 20
_SHARD = re.compile(r"shard_(\d{5})\.npz")


def _digest(path: Path) -> str | None:
    """sha256 of a regular file that is no symbolic link; None for anything else."""
    if path.is_symlink():
        return None
    try:
        return sha256_of_regular(path)
    except OSError:
        return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _check_member(member, size: int, name: str) -> None:
    """ValueError when the .npy in a zip member claims more data than the member holds."""
    version = np.lib.format.read_magic(member)
    read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}.get(version)
    if read_header is None:
        raise ValueError(f"{name}: .npy format version {version} is not one np.savez writes")
    shape, _, dtype = read_header(member)
    needed = math.prod(int(d) for d in shape) * dtype.itemsize
    if needed > size - member.tell():
        raise ValueError(f"{name}: its header says {list(shape)} {dtype}, more than the member holds")


@dataclass(frozen=True)
class Shard:
    index: int
    ranges: tuple             # ((start, end), ...) in sample order

    @property
    def samples(self) -> int:
        return sum(e - s for s, e in self.ranges)


def plan(ranges: list, per_shard: int) -> list:
    """Consecutive `per_shard` ranges per shard, in order."""
    per_shard = max(1, int(per_shard))
    return [Shard(i, tuple(ranges[k:k + per_shard]))
            for i, k in enumerate(range(0, len(ranges), per_shard))]


def shard_size(batches: int, workers: int, target: int = 4) -> int:
    """Batches per shard: about `target` shards per worker, so a dead worker's re-run is small
    and the faster workers take more, while each shard still amortises its round trip."""
    return max(1, -(-batches // max(1, workers * target)))


def file_digest(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(files: list, **facts) -> str:
    """sha256 over the files' contents and the facts (sizes, names) that decide the shards."""
    h = hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode())
    for path in files:
        h.update(file_digest(path).encode())
    return h.hexdigest()


class ShardStore:
    """builds/<library>/.../<run>/: shard_<i>.npz files and manifest.json."""

    def __init__(self, directory, key: str):
        self.directory = Path(directory)
        self.key = key
        self.discarded = 0      # shards of another fingerprint, or damaged, removed at open
        self.sums = {}          # index -> sha256 of each shard saved (the manifest's record)

    def open(self, resume: bool = True, count: int | None = None) -> set:
        """Make the folder ready; returns the indices of the shards already done (none unless
        `resume` and the fingerprint matches). A shard counts only if it is a regular file named
        as this store names them, of an index below `count`, whose sha256 is the one recorded
        when it was saved: a truncated, edited (zeroed outputs), planted or stray file, a link to
        /dev/zero or a directory is removed, and its shard runs again."""
        manifest = self.directory / MANIFEST
        recorded, same = {}, False
        try:
            doc = json.loads(read_limited(manifest, MANIFEST_LIMIT))
            same = isinstance(doc, dict) and doc.get("key") == self.key
            recorded = doc.get("shards") if same and isinstance(doc.get("shards"), dict) else {}
        except (OSError, ValueError, RecursionError):
            pass
        if (self.directory.exists() or self.directory.is_symlink()) and not (same and resume):
            self.discarded = len(list(self.directory.glob("shard_*.npz"))) if self.directory.is_dir() else 0
            _remove(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.sums = {}
        for p in list(self.directory.iterdir()):
            if p.name == MANIFEST:
                continue
            m = _SHARD.fullmatch(p.name)
            index = int(m.group(1)) if m else -1
            want = recorded.get(str(index))
            if m and (count is None or index < count) and isinstance(want, str) and _digest(p) == want:
                self.sums[index] = want
                continue
            self.discarded += bool(m)
            _remove(p)
        self._write_manifest()
        return set(self.sums)

    def _write_manifest(self) -> None:
        atomic_write_text(self.directory / MANIFEST, json.dumps(
            {"key": self.key, "shards": {str(i): h for i, h in sorted(self.sums.items())}}))

    def path(self, index: int) -> Path:
        return self.directory / f"shard_{index:05d}.npz"

    def save(self, index: int, arrays: dict) -> None:
        atomic_write(self.path(index), lambda f: np.savez(f, **arrays))
        self.sums[index] = sha256_of_regular(self.path(index))
        self._write_manifest()

    def discard(self, index: int) -> None:
        """Forget shard `index` (its file no longer fits): removed, to be run again."""
        self.sums.pop(index, None)
        _remove(self.path(index))
        self.discarded += 1
        self._write_manifest()

    def load(self, index: int) -> dict:
        """The shard's arrays; ValueError for an array whose header claims more bytes than its
        zip member holds (numpy allocates what the header says before reading)."""
        with open_regular(self.path(index)) as f:
            with zipfile.ZipFile(f) as zf:
                for info in zf.infolist():
                    with zf.open(info) as member:
                        _check_member(member, info.file_size, info.filename)
            f.seek(0)
            with np.load(f, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

