"""The engine mace_run.pyz opens on a board for the model's runtime (`--runtime`):

  cpu            the CPU engine
  gpu, cpu+gpu   the GPU engine (mace/runtime/gpu) when the board's Python has pyopencl and an
                 OpenCL device that builds kernels; otherwise every op runs on the board's CPU
                 and `fallback` says why (the host's cpu+gpu falls back the same way; on a board
                 gpu does too, as every board run did before the GPU engine shipped)
  dsp            the DspBackend named by --dsp_backend (default the Hexagon simulator), found
                 by the board's Python (built-in, or a plugin installed there)

The OpenCL cache files sit in --opencl_dir, named per device as MACE names them
(`<library>_compiled_opencl_kernel.<model>.<soc>.bin`, `..._tuned_opencl_parameter...`):
`run` pushes the host's copies there, the GPU engine reads them at load and rewrites them when
it built or tuned something new, and `opencl_files` lists them (bytes, sha256) so the host can
pull back what changed. The runner imports this module after its flags are read (numpy late), so
its imports sit at the top; pyopencl itself loads only when a GPU engine starts (gpu/context.py).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from mace.runtime.affinity import wait_options
from mace.runtime.dsp.engine import create_dsp_engine
from mace.runtime.engine import create_engine
from mace.runtime.gpu.cache_files import KERNELS, TUNING, cache_path
from mace.runtime.gpu.context import unavailable_reason
from mace.runtime.gpu.deploy import GPU_RUNTIMES, engine_notes
from mace.runtime.gpu.options import GpuOptions
from mace.ir.runtimes import DSP_BACKEND_RUNTIMES


@dataclass
class BoardEngine:
    engine: object
    runtime: str                    # what ran: the --runtime asked, or cpu after a fallback
    notes: list = field(default_factory=list)
    fallback: str = ""              # why a GPU runtime ran on the CPU ("" when it did not)
    opencl: dict = field(default_factory=dict)   # stats and cache files of a GPU engine


def open_board_engine(args) -> BoardEngine:
    if args.runtime in DSP_BACKEND_RUNTIMES:
        return _dsp(args)
    if args.runtime in GPU_RUNTIMES:
        return _gpu(args)
    return BoardEngine(create_engine(args.model, args.data, options=_cpu_options(args)), "cpu")


def _cpu_options(args) -> dict:
    """The engine options of the runner's CPU flags: how the compute pool's threads wait."""
    return wait_options(args.cpu_wait_policy or None) or {}


def _dsp(args) -> BoardEngine:
    engine = create_dsp_engine(args.model, args.data, args.dsp_backend, options=_cpu_options(args),
                               where=args.dsp_backend_where or "--dsp_backend")
    return BoardEngine(engine, "dsp", [engine.describe()])


def _gpu(args) -> BoardEngine:
    reason = unavailable_reason()
    if reason:
        return BoardEngine(create_engine(args.model, args.data, options=_cpu_options(args)), "cpu",
                           fallback=reason)
    options = GpuOptions.from_args(args)   # as the host wrote them: mace/runtime/gpu/options.py
    engine = create_engine(args.model, args.data, device=args.runtime,
                           options={**options.engine_options(), **_cpu_options(args)})
    gpu = engine.gpu
    stats = {"device": gpu.gctx.device.name.strip(), "data_type": gpu.data_type,
             "built": gpu.programs.stats["built"], "loaded": gpu.programs.stats["loaded"],
             "tuned_loaded": gpu.tuner.loaded, "tuning": bool(gpu.tuner.tuning),
             "files": opencl_files(options.opencl_cache_dir, options.library, gpu.cache_name)}
    return BoardEngine(engine, args.runtime, engine_notes(engine), opencl=stats)


def opencl_files(directory, library: str, cache_name: str) -> list:
    """The cache files of this device in `directory`: [{"file", "bytes", "sha256"}]."""
    if not directory or not library:
        return []
    found = []
    for kind in (KERNELS, TUNING):
        path = cache_path(directory, library, kind, cache_name)
        if path.is_file():
            found.append({"file": path.name, "bytes": os.path.getsize(path), "sha256": _sha256(path)})
    return found


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
