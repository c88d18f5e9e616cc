"""OpenCL programs: the package's .cl files compiled at run time, with a binary cache.

Each file under mace/ops/gpu/cl/ is one program; common.cl is prepended to all.
Build options carry the data type (`-DFP16_STORAGE=1` for fp16_fp32/fp16_fp16,
0 for fp32_fp32) and, when asked, the range check's counting stores (`-DRANGE_CHECK=1`).
A program's key hashes its source and options, so editing a
kernel invalidates its cached binary by itself. Programs are shared by every
engine of the process; the cache file (see cache_files.py) makes the next
process's init skip the compiler.
"""
from __future__ import annotations

import functools
import hashlib
import logging
from importlib import resources
from pathlib import Path

from mace.runtime.gpu.cache_files import KERNELS, read_cache, write_cache

log = logging.getLogger("mace.gpu")
# Read as package resources, not paths: on a board the sources sit inside mace_run.pyz (a zip).
CL_PACKAGE, CL_FOLDER = "mace.ops.gpu", "cl"
FP16_TYPES = ("fp16_fp32", "fp16_fp16", "bf16_fp32")


def is_fp16(data_type: str) -> bool:
    return data_type in FP16_TYPES


def build_options(data_type: str, range_check: bool = False) -> str:
    # The range check's counting stores take one more kernel argument; the argument names tell
    # the runtime which kernels have it (range_check.py).
    check = " -DRANGE_CHECK=1 -cl-kernel-arg-info" if range_check else ""
    return f"-DFP16_STORAGE={int(is_fp16(data_type))}{check}"


@functools.lru_cache(maxsize=None)
def source(name: str) -> str:
    folder = resources.files(CL_PACKAGE).joinpath(CL_FOLDER)
    return folder.joinpath("common.cl").read_text() + "\n" + folder.joinpath(f"{name}.cl").read_text()


class ProgramCache:
    """Programs for one engine: in-process sharing first, then the cache file, then the compiler."""

    def __init__(self, gctx, data_type: str, cache_file: Path | None = None, range_check: bool = False):
        self.gctx = gctx
        self.options = build_options(data_type, range_check)
        self.cache_file = cache_file
        self.on_disk = read_cache(cache_file, KERNELS, gctx.fingerprint()) if cache_file else {}
        self.new = {}           # key -> binary not yet in the cache file
        self.stats = {"built": 0, "loaded": 0, "shared": 0}
        self._keys = {}

    def key(self, name: str) -> str:
        if name not in self._keys:
            digest = hashlib.sha256((source(name) + "\0" + self.options).encode()).hexdigest()[:16]
            self._keys[name] = f"{name}:{digest}"
        return self._keys[name]

    def program(self, name: str):
        key = self.key(name)
        prog = self.gctx.programs.get(key)
        if prog is not None:
            self.stats["shared"] += 1
        elif key in self.on_disk:
            prog = self._from_binary(name, key)
        if prog is None:
            prog = self._from_source(name)
            self.stats["built"] += 1
        self.gctx.programs[key] = prog
        if self.cache_file and key not in self.on_disk and key not in self.new:
            self.new[key] = self._binary(prog)
        return prog

    def _from_binary(self, name: str, key: str):
        cl = self.gctx.cl
        try:
            prog = cl.Program(self.gctx.context, [self.gctx.device], [self.on_disk[key]])
            prog = prog.build(self.options)
        except Exception as e:
            log.warning(f"warning: cached OpenCL binary of {name}.cl unusable ({e}); rebuilding")
            del self.on_disk[key]
            return None
        self.stats["loaded"] += 1
        return prog

    def _from_source(self, name: str):
        cl = self.gctx.cl
        # The low-level program skips pyopencl's own cache: ours is the one that is shipped.
        prog = cl.Program(cl._cl._Program(self.gctx.context, source(name)))
        try:
            return prog.build(self.options)
        except cl.RuntimeError as e:
            raise RuntimeError(f"OpenCL build of {name}.cl failed: {e}") from None

    def _binary(self, prog) -> bytes:
        return bytes(prog.get_info(self.gctx.cl.program_info.BINARIES)[0])

    def save(self) -> bool:
        """Write the cache file when this engine built or met programs it lacked."""
        if not self.cache_file or not self.new:
            return False
        entries = {**self.on_disk, **self.new}
        write_cache(self.cache_file, KERNELS, self.gctx.fingerprint(), entries)
        self.on_disk, self.new = entries, {}
        return True
