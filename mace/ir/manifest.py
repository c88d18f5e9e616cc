"""The build manifest: `<model>.manifest.json`, written last by `convert`, checked at load.

A converted model is several files (.pb, .data, generated code, maps) that are
moved into place one by one, so a killed `convert` can leave a mix of two
builds. The manifest lists every file of one model's build with its sha256 and
size, plus what the build was made from (`made_from`, compared by
mace/config/provenance.py). It is written after all of them, atomically, so:
no manifest, or a file that does not match it, means the build is incomplete.

The manifest holds nothing that changes between two converts of the same
inputs, so builds stay reproducible byte for byte. Cost at load: the .pb (small)
is hashed every time; a bigger file (the .data, weights as code) is hashed only
when its stat (size, mtime_ns, ctime_ns, inode) differs from the one in the stat
cache (`<model>.stat_cache.json`, written after the manifest, refreshed by a load
that had to hash), so an untouched 100 MB model loads without reading its
weights. ctime cannot be set by a user, so a rewrite in place is noticed; a
copied build is hashed once. A missing or stale cache only costs time.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from mace.errors import ModelError
from mace.util.atomic import atomic_write_text
from mace.util.regular_file import read_limited, sha256_of_regular

FORMAT = "pymace-build-manifest/1"
SUFFIX = ".manifest.json"
CACHE_SUFFIX = ".stat_cache.json"
HASH_ALWAYS_BELOW = 1 << 20   # files smaller than this are hashed at every load


def manifest_path(model_dir: Path, model: str) -> Path:
    return Path(model_dir) / f"{model}{SUFFIX}"


MANIFEST_LIMIT = 64 << 20     # a manifest or stat cache: a few KiB per file of the build


def file_sha256(path: Path) -> str:
    """sha256 of a regular file (a FIFO or a link to /dev/zero planted in a build never blocks)."""
    return sha256_of_regular(path)


def stat_key(path: Path) -> list:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class StatCache:
    """sha256 of files by their stat: `<model>.stat_cache.json` beside the manifest."""

    def __init__(self, model_dir: Path, model: str):
        self.path = Path(model_dir) / f"{model}{CACHE_SUFFIX}"
        try:
            self.entries = json.loads(read_limited(self.path, MANIFEST_LIMIT))
            if not isinstance(self.entries, dict):
                self.entries = {}
        except (OSError, ValueError, RecursionError):
            self.entries = {}
        self.changed = False

    def sha256(self, path: Path, key: str | None = None) -> str:
        """The file's sha256, read from the cache when its stat is the one recorded."""
        key = key or Path(path).name
        now = stat_key(path)
        cached = self.entries.get(key)
        if isinstance(cached, list) and len(cached) == 2 and cached[0] == now:
            return cached[1]
        digest = file_sha256(path)
        self.entries[key] = [now, digest]
        self.changed = True
        return digest

    def save(self) -> None:
        """Best effort: a read-only build folder just means hashing again next time."""
        if not self.changed:
            return
        try:
            atomic_write_text(self.path, json.dumps(self.entries, sort_keys=True), sync=True)
        except OSError:
            pass


def describe(path: Path, role: str) -> dict:
    """One file's entry: role ('graph', 'data', 'code' are checked at load; 'text' is not)."""
    return {"role": role, "sha256": file_sha256(path), "size": path.stat().st_size}


def write_manifest(library_dir: Path, model: str, files: dict, made_from: dict) -> Path:
    """Write builds/<library>/model/<model>.manifest.json for `files` ({path: role}), atomically."""
    library_dir = Path(library_dir)
    entries = {Path(p).relative_to(library_dir).as_posix(): describe(Path(p), role)
               for p, role in files.items()}
    doc = {"format": FORMAT, "model": model, "files": entries, "made_from": made_from}
    path = manifest_path(library_dir / "model", model)
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True), sync=True)
    cache = StatCache(path.parent, model)   # after the manifest: it only saves time
    for rel, entry in entries.items():
        cache.entries[rel] = [stat_key(library_dir / rel), entry["sha256"]]
    cache.changed = True
    cache.save()
    return path




def read_manifest(path: Path, rerun: str) -> dict:
    """The manifest at `path`, or a ModelError ending in `rerun` (how to re-run convert)."""
    path = Path(path)
    try:
        doc = json.loads(read_limited(path, MANIFEST_LIMIT))
    except FileNotFoundError:
        raise ModelError(f"{path} is missing: the build is incomplete (convert was interrupted) or "
                         f"made by an older version; {rerun}") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        why = getattr(e, "strerror", None) or ("nested too deeply" if isinstance(e, RecursionError) else e)
        raise ModelError(f"{path}: unreadable build manifest ({why}); {rerun}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelError(f"{path}: not a build manifest of this version; {rerun}")
    problem = _shape_problem(doc)
    if problem:
        raise ModelError(f"{path}: the build manifest does not describe a build ({problem}), so the "
                         f"build is stale or was changed after convert; {rerun}")
    return doc


_FILE_KEYS = {"role": str, "sha256": str, "size": int}


def _shape_problem(doc: dict) -> str:
    """What makes `doc` no description of a build ('' when it is one): every file an entry of a
    role, sha256 and size, a graph and a data file among them (an edited `files: {}` would
    otherwise check nothing), and `made_from` of the shape convert writes."""
    files = doc.get("files")
    if not isinstance(files, dict):
        return "files: not a mapping"
    for rel, entry in files.items():
        if not isinstance(entry, dict) or any(type(entry.get(k)) is not t for k, t in _FILE_KEYS.items()):
            return f"files.{rel}: not a role, sha256 and size"
    for role in ("graph", "data"):
        if not any(e["role"] == role for e in files.values()):
            return f"files: no {role} file listed"
    made = doc.get("made_from")
    if not isinstance(made, dict):
        return "made_from: not a mapping"
    for key in ("model_file", "weight_file"):
        record = made.get(key)
        if record is not None and not (isinstance(record, dict) and
                                       all(isinstance(v, (str, type(None))) for v in record.values())):
            return f"made_from.{key}: not a mapping of path and sha256"
    if not isinstance(made.get("library") or {}, dict):
        return "made_from.library: not a mapping"
    subgraphs = made.get("subgraphs") or {}
    if not isinstance(subgraphs, dict) or not all(isinstance(v, dict) for v in subgraphs.values()):
        return "made_from.subgraphs: not a mapping of mappings"
    return ""


def verify_files(manifest: Path, doc: dict, rerun: str, cache: StatCache,
                 roles=("graph", "data", "code")) -> None:
    """Every file of `roles` in the manifest exists with its recorded size and sha256."""
    library_dir = Path(manifest).parent.parent
    for rel, entry in doc["files"].items():
        if entry.get("role") not in roles:
            continue
        path = library_dir / rel
        problem = _mismatch(path, rel, entry, cache)
        if problem:
            raise ModelError(f"{path}: {problem}, so the build is torn or was changed after convert "
                             f"(the files no longer belong together); {rerun}")


def _mismatch(path: Path, rel: str, entry: dict, cache: StatCache) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return "missing (listed in the build manifest)"
    if size != entry.get("size"):
        return f"{size} bytes, the build manifest says {entry.get('size')}"
    try:
        digest = file_sha256(path) if size < HASH_ALWAYS_BELOW else cache.sha256(path, rel)
    except OSError as e:   # a FIFO or a link to /dev/zero in place of the file
        return f"cannot be read ({e.strerror})"
    if digest != entry.get("sha256"):
        return "contents differ from the build manifest (sha256)"
    return ""
