"""How a run goes, declared once (issue 32): the engine and run-loop options of `run`, `benchmark`
and `sweep`, the same object on this machine (mace/run.py) and for a board (the runner's flags
are made from it: mace/devices/target_run.py `runner_options`). The CLI builds it from its flags
(mace/cli/_run_options.py); a library caller passes one, or its fields as keywords to `run_model`.
A misspelt field is a TypeError, not an ignored keyword."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunOptions:
    models: list = field(default_factory=list)   # model names; [] = every model of the file
    build_dir: str | None = None
    rounds: int = 1                  # timed runs after the warm-up run
    validate: bool = False           # compare with the original framework
    input_dir: str | None = None     # DIR/<input>.npy (or MACE's raw files, or images)
    output_dir: str | None = None
    output_format: str = "npy"       # npy, or MACE's raw model_out_<name> files
    num_threads: int = -1            # BLAS / compute-pool threads; <= 0: the library default
    seed: int = 0                    # random validation inputs
    profile: bool = False            # time every op (--vlog_level 2)
    cpu_affinity_policy: int = 0     # MACE's CPUAffinityPolicy
    cpu_wait_policy: str | None = None   # how the compute pool's idle threads wait (None: default)
    restart_round: int = 1           # MACE's --restart_round: engines created in turn
    input_shapes: dict | None = None     # {input: dims}: run at these shapes (variable dimensions)
    # GPU (the engine's options are built from these: mace/runtime/gpu/options.py)
    tuning: bool = False             # search work-group sizes
    auto_tuning: bool = True         # False: --disable_tuning (target_socs starts no tuning)
    gpu_perf_hint: int = 0
    gpu_priority_hint: int = 0
    # boards (ssh, adb)
    timeout: float = 300.0           # --device_timeout: each step on the device
    lock_timeout: float = 3600.0     # --device_lock_timeout: waiting for another run
    benchmark: bool = False          # MACE's benchmark tables instead of a run (rounds, warmup)
    warmup: int = 1
