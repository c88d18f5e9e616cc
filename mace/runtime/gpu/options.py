"""The GPU engine's options, declared once (issue 32): a frozen record, one builder from the
deployment file, and its form as mace_run.pyz flags, written by the host and read back on the
board by the same code, so a board's GPU run is set up as the host's by construction (before,
the board's copy had lost `gpu_range_check`: fp16 saturation was counted on the host only).

    opts = gpu_options(config, sg, cache_dir, tuned_file, tuning=..., ...)   # host or board run
    engine = create_engine(pb, data, device="gpu", options=opts.engine_options())
    argv += opts.to_argv()                                  # the host, for the board's runner
    GpuOptions.add_arguments(parser); GpuOptions.from_args(ns)   # the runner
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from mace.runtime.gpu.programs import is_fp16
from mace.util.flag_record import FlagRecord, option

HINT = dict(choices=range(4), metavar="{0..3}")


@dataclass(frozen=True)
class GpuOptions(FlagRecord):
    """Engine options of a GPU run (mace/runtime/gpu/runtime.py reads them by these names)."""

    data_type: str = option("", "GPU storage type (default: the model's data_type)")
    library: str = option("", "library name: the first part of the OpenCL cache file names")
    opencl_cache_dir: str = option("", "where the OpenCL cache files are read and written", "--opencl_dir")
    opencl_cache_name: str = option("", "device part of the cache file names (default: the OpenCL "
                                        "device's name)")
    opencl_tuning: bool = option(False, "tune work-group sizes, save them")
    limit_opencl_kernel_time: bool = option(False, "split long GPU kernels")
    gpu_perf_hint: int = option(0, "OpenCL performance hint", **HINT)
    gpu_priority_hint: int = option(0, "OpenCL queue priority hint", **HINT)
    gpu_range_check: bool = option(False, "count what fp16 storage clamps or flushes per op (on for half "
                                          "storage)")

    def engine_options(self) -> dict:
        """The Engine's `options` (empty strings left out: the engine's defaults stand)."""
        return {k: v for k, v in asdict(self).items() if v != ""}


def gpu_options(library: str, data_type: str, limit_kernel_time: bool, cache_dir, tuned_file: Path | None,
                target_socs=(), *, tuning: bool = False, auto_tuning: bool = True, perf_hint: int = 0,
                priority_hint: int = 0, cache_name: str = "") -> GpuOptions:
    """The options of a GPU run, for this host or a board. The tuning rule, once: tune when asked,
    or when target_socs names SoCs and this device has no tuned file yet (`auto_tuning=False`:
    MACE's --disable_tuning). Half storage always counts its stores, so no run saturates silently."""
    tune = bool(tuning or (auto_tuning and target_socs and not (tuned_file and Path(tuned_file).exists())))
    return GpuOptions(data_type=data_type, library=library, opencl_cache_dir=str(cache_dir or ""),
                      opencl_cache_name=cache_name or "", opencl_tuning=tune,
                      limit_opencl_kernel_time=bool(limit_kernel_time), gpu_perf_hint=int(perf_hint),
                      gpu_priority_hint=int(priority_hint), gpu_range_check=is_fp16(data_type))
