"""Shards of a sample loop and the folder that keeps their results, so a run can resume.

A shard is a run of consecutive batches ([start, end) sample ranges). Its result is saved as
`shard_<index>.npz` (arrays only: no pickle is ever loaded back) next to a `manifest.json`
holding the fingerprint of what produced it (model files, script, sizes). A folder whose
fingerprint differs was made by another build or script: it is emptied, never mixed in.
Writes go to a temporary file first and are renamed into place, so a worker or driver that
dies mid-write leaves no half shard behind.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mace.util.atomic import atomic_write, atomic_write_text

MANIFEST = "manifest.json"


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
        self.discarded = 0      # shards of another fingerprint removed at open

    def open(self, resume: bool = True) -> set:
        """Make the folder ready; returns the indices of the shards already done (none unless
        `resume` and the fingerprint matches)."""
        manifest = self.directory / MANIFEST
        same = False
        if manifest.is_file():
            try:
                same = json.loads(manifest.read_text()).get("key") == self.key
            except (OSError, ValueError):
                same = False
        if self.directory.exists() and not (same and resume):
            self.discarded = len(list(self.directory.glob("shard_*.npz")))
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(manifest, json.dumps({"key": self.key}))
        return {int(p.stem.split("_")[1]) for p in self.directory.glob("shard_*.npz")}

    def path(self, index: int) -> Path:
        return self.directory / f"shard_{index:05d}.npz"

    def save(self, index: int, arrays: dict) -> None:
        atomic_write(self.path(index), lambda f: np.savez(f, **arrays))

    def load(self, index: int) -> dict:
        with np.load(self.path(index), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

