"""The one RunOptions (mace/runtime/run_options.py) a command's flags make: `run` and `benchmark`
pass it to this machine's run and to the boards' alike, so the two cannot drift apart."""
from __future__ import annotations

from mace.cli import _gpu_flags
from mace.runtime.run_options import RunOptions


def run_options(args, config, **extra) -> RunOptions:
    """RunOptions from the parsed flags; `extra` sets the fields a command decides itself
    (input_shapes, benchmark and warmup)."""
    gpu = _gpu_flags.run_kwargs(args) if hasattr(args, "tuning") else {}
    return RunOptions(models=list(args.models or config.models), build_dir=args.build_dir, rounds=args.round,
                      validate=getattr(args, "validate", False), input_dir=args.input_dir,
                      output_dir=getattr(args, "output_dir", None), output_format=getattr(args, "output_format", "npy"),
                      num_threads=args.num_threads, seed=args.seed, profile=args.vlog_level >= 2,
                      cpu_affinity_policy=getattr(args, "cpu_affinity_policy", 0),
                      cpu_wait_policy=getattr(args, "cpu_wait_policy", None),
                      restart_round=getattr(args, "restart_round", 1),
                      timeout=args.device_timeout, lock_timeout=args.device_lock_timeout, **gpu, **extra)
