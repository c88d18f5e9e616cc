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

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from mace.runtime.gpu.programs import is_fp16


def _flag(help_text: str, *aliases: str):
    return {"help": help_text, "aliases": aliases}


@dataclass(frozen=True)
class GpuOptions:
    """Engine options of a GPU run (mace/runtime/gpu/runtime.py reads them by these names)."""

    data_type: str = field(default="", metadata=_flag("GPU storage type (default: the model's data_type)"))
    library: str = field(default="", metadata=_flag("library name: the first part of the OpenCL cache "
                                                     "file names"))
    opencl_cache_dir: str = field(default="", metadata=_flag("where the OpenCL cache files are read and "
                                                             "written", "--opencl_dir"))
    opencl_cache_name: str = field(default="", metadata=_flag("device part of the cache file names "
                                                              "(default: the OpenCL device's name)"))
    opencl_tuning: bool = field(default=False, metadata=_flag("tune work-group sizes, save them"))
    limit_opencl_kernel_time: bool = field(default=False, metadata=_flag("split long GPU kernels"))
    gpu_perf_hint: int = field(default=0, metadata=_flag("OpenCL performance hint 0..3"))
    gpu_priority_hint: int = field(default=0, metadata=_flag("OpenCL queue priority hint 0..3"))
    gpu_range_check: bool = field(default=False, metadata=_flag(
        "count what fp16 storage clamps or flushes per op (on for half storage)"))

    def engine_options(self) -> dict:
        """The Engine's `options` (empty strings left out: the engine's defaults stand)."""
        return {k: v for k, v in asdict(self).items() if v != ""}

    def to_argv(self) -> list:
        """The runner's flags for these options (`--name=value`: a value starting with '-' stays one)."""
        argv = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool":
                argv += [f"--{f.name}"] if value else []
            elif value != "":
                argv.append(f"--{f.name}={value}")
        return argv

    @classmethod
    def add_arguments(cls, group) -> None:
        """Declare the flags to_argv writes (argparse group or parser)."""
        for f in fields(cls):
            names = [f"--{f.name}", *f.metadata["aliases"]]
            if f.type == "bool":
                group.add_argument(*names, dest=f.name, action="store_true", help=f.metadata["help"])
            elif f.type == "int":
                group.add_argument(*names, dest=f.name, type=int, default=f.default, choices=range(4),
                                   metavar="{0..3}", help=f.metadata["help"])
            else:
                group.add_argument(*names, dest=f.name, default=f.default, help=f.metadata["help"])

    @classmethod
    def from_args(cls, namespace) -> "GpuOptions":
        values = {f.name: getattr(namespace, f.name) for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if v is not None})


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
