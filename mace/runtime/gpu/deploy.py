"""What `run` needs for runtime gpu / cpu+gpu: the engine's device and options, and notes.

Cache files go to builds/<library>/opencl/<abi>/ (MACE's tree; `run` executes on
the host, so abi is "host"). Tuning runs when asked (--tuning) or when the .yml
names target_socs and no tuned file exists yet; later runs load the file.
Without a usable OpenCL device, cpu+gpu runs on the CPU with a note and gpu
is an error naming the reason.
"""
from __future__ import annotations

from pathlib import Path

from mace.ir import runtimes
from mace.ir.args import get_arg
from mace.runtime.gpu.cache_files import TUNING, cache_path
from mace.runtime.gpu.options import gpu_options
from mace.runtime.gpu.range_counts import range_notes
from mace.runtime.gpu.runtime import CHECKED_ARG, FP32_REASON_ARG

SHOWN = 5   # kept ops `run` lists one per line
from mace.runtime.gpu.context import GpuUnavailable, gpu_context, unavailable_reason

GPU_RUNTIMES = runtimes.GPU_RUNTIMES   # re-exported: the GPU runtimes' users look here
HOST_ABI = "host"


def opencl_dir(config, build_dir=None) -> Path:
    return Path(build_dir or "builds") / config.library_name / "opencl" / HOST_ABI


def engine_setup(config, sg, build_dir=None, tuning: bool = False, perf_hint: int = 0,
                 priority_hint: int = 0, auto_tuning: bool = True) -> tuple:
    """(device, engine options, notes) for a subgraph. `auto_tuning=False` (MACE's
    --disable_tuning) keeps target_socs from starting a tuning run."""
    if sg.runtime not in GPU_RUNTIMES:
        return "cpu", None, []
    reason = unavailable_reason()
    if reason:
        if sg.runtime == "cpu+gpu":
            return "cpu", None, [f"no usable OpenCL device ({reason}): cpu+gpu runs every op on the CPU"]
        raise GpuUnavailable(f"{config.path}: {sg.key_path}.runtime: gpu: {reason}")
    directory = opencl_dir(config, build_dir)
    tuned = cache_path(directory, config.library_name, TUNING, gpu_context().name)
    options = gpu_options(config.library_name, sg.data_type, sg.limit_opencl_kernel_time, directory, tuned,
                          config.target_socs, tuning=tuning, auto_tuning=auto_tuning, perf_hint=perf_hint,
                          priority_hint=priority_hint)
    return "gpu", options.engine_options(), []


def engine_notes(engine) -> list:
    """Where ops ran and what the OpenCL side did at init (printed by `run`)."""
    gpu = getattr(engine, "gpu", None)
    if gpu is None:
        return []
    stats = gpu.programs.stats
    notes = [gpu.summary(),
             f"OpenCL {gpu.gctx.device.name.strip()} ({gpu.data_type}): programs built {stats['built']}, "
             f"loaded from cache {stats['loaded']}; tuned parameters loaded {gpu.tuner.loaded}"
             + (", tuned now" if gpu.tuner.tuning else "")]
    kept = [op for op in gpu.graph.net.op if op.name in gpu.fp32_ops]
    notes += [f"GPU op {op.name} ({op.type}) keeps float storage: "
              + (get_arg(op, FP32_REASON_ARG, "") or "named in gpu_fp32_ops") for op in kept[:SHOWN]]
    if len(kept) > SHOWN:
        notes.append(f"... and {len(kept) - SHOWN} more GPU op(s) keep float storage "
                     f"({len(kept)} of {len(gpu.on_gpu)}; `gpu_fp32: 1` in the .pb_txt)")
    return notes + list(dict.fromkeys(gpu.notes))


def range_check_notes(engine) -> list:
    """After a run: the first op fp16 storage could not hold, and the hint (range_counts.py)."""
    gpu = getattr(engine, "gpu", None)
    if gpu is None or gpu.counters is None:
        return []
    checked = get_arg(gpu.graph.net, CHECKED_ARG, None) is not None   # auto measured the half ops
    return range_notes(gpu.range_counts(engine.nodes), gpu.data_type, underflow=not checked)


__all__ = ["GPU_RUNTIMES", "GpuUnavailable", "engine_notes", "engine_setup", "opencl_dir", "range_check_notes"]
