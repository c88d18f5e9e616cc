"""The two GPU cache files: compiled program binaries and tuned work-group sizes.

    builds/<library>/opencl/<abi>/<library>_compiled_opencl_kernel.<device>.bin
    builds/<library>/opencl/<abi>/<library>_tuned_opencl_parameter.<device>.bin

Both use one container: 8-byte magic, little-endian u64 header length, a JSON
header (kind, format version, the device fingerprint, entry -> [offset, size,
sha256]) and the entry blobs. A file that is truncated, damaged, of the other
kind, or written for another device/driver is ignored with a warning (logged on
`mace.gpu`): the runtime then builds or tunes again and rewrites it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import struct
from pathlib import Path

from mace.util.atomic import atomic_write

log = logging.getLogger("mace.gpu")

MAGIC = b"MACEGPU\x01"
FORMAT_VERSION = 1
KERNELS, TUNING = "compiled_opencl_kernel", "tuned_opencl_parameter"


def cache_path(directory, library: str, kind: str, device_name: str) -> Path:
    return Path(directory) / f"{library}_{kind}.{device_name}.bin"


def write_cache(path: Path, kind: str, fingerprint: dict, entries: dict) -> None:
    """Write `entries` (str -> bytes) atomically (a reader never sees half a file)."""
    index, blobs, offset = {}, [], 0
    for key, blob in sorted(entries.items()):
        index[key] = [offset, len(blob), hashlib.sha256(blob).hexdigest()]
        blobs.append(blob)
        offset += len(blob)
    header = json.dumps({"kind": kind, "version": FORMAT_VERSION, "fingerprint": fingerprint,
                         "entries": index}, sort_keys=True).encode()
    path = Path(path)

    def write(f) -> None:
        f.write(MAGIC + struct.pack("<Q", len(header)) + header)
        for blob in blobs:
            f.write(blob)
    atomic_write(path, write)


def read_cache(path: Path, kind: str, fingerprint: dict) -> dict:
    """Entries of a valid cache file for this device; {} (with a warning) for anything else."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = path.read_bytes()
        return _parse(data, kind, fingerprint)
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        log.warning(f"warning: ignoring OpenCL cache file {path}: {e}; it will be rebuilt")
        return {}


def _parse(data: bytes, kind: str, fingerprint: dict) -> dict:
    if data[:len(MAGIC)] != MAGIC:
        raise ValueError("not a cache file of this toolchain (bad magic)")
    (size,) = struct.unpack_from("<Q", data, len(MAGIC))
    start = len(MAGIC) + 8
    if start + size > len(data):
        raise ValueError("truncated header")
    header = json.loads(data[start:start + size])
    if header.get("kind") != kind:
        raise ValueError(f"it holds {header.get('kind')!r}, expected {kind!r}")
    if header.get("version") != FORMAT_VERSION:
        raise ValueError(f"format version {header.get('version')}, expected {FORMAT_VERSION}")
    if header.get("fingerprint") != fingerprint:
        raise ValueError(f"written for another device or driver ({_describe(header.get('fingerprint'))}, "
                         f"this is {_describe(fingerprint)})")
    blobs = data[start + size:]
    entries = {}
    for key, (offset, length, digest) in header["entries"].items():
        blob = blobs[offset:offset + length]
        if len(blob) != length or hashlib.sha256(blob).hexdigest() != digest:
            raise ValueError(f"entry {key!r} is damaged")
        entries[key] = blob
    return entries


def _describe(fp) -> str:
    if not isinstance(fp, dict):
        return "unknown"
    return f"{fp.get('device')}, driver {fp.get('driver')}"
