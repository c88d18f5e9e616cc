"""How mace_run.pyz runs a model on a board, declared once (issue 32): `run` on the host builds a
RunnerOptions from its own options and writes it as the runner's flags (`to_argv`); the runner
declares and reads the same fields (`add_arguments`, `from_args`). The GPU engine's options are
the other half (mace/runtime/gpu/options.py). Standard library only: the runner reads its flags
before numpy loads."""
from __future__ import annotations

from dataclasses import dataclass

from mace.util.flag_record import FlagRecord, option

WAIT_POLICIES = ("auto", "passive", "short", "spin")


@dataclass(frozen=True)
class RunnerOptions(FlagRecord):
    round: int = option(1, "timed runs after the warm-up run")
    omp_num_threads: int = option(-1, "BLAS threads (-1: library default)")
    profile: bool = option(False, "time every op (run --vlog_level 2)")
    benchmark: bool = option(False, "measure MACE's benchmark tables (--warmup runs, then --round runs "
                                    "without and --round runs with per-op statistics); no outputs are written")
    warmup: int = option(1, "warm-up runs of --benchmark")
    cpu_affinity_policy: int = option(0, "pin the threads: 0 none, 1 big cores, 2 little cores, 3 high "
                                         "performance, 4 power save (MACE's CPUAffinityPolicy)",
                                      choices=range(5), metavar="{0..4}")
    restart_round: int = option(1, "create the engine this many times, each run as --round says (MACE's "
                                   "flag); the result lists every init time and reports the last engine's runs")
    cpu_wait_policy: str = option("", "how the compute pool's idle threads wait (converter.py run "
                                      "--cpu_wait_policy)", choices=WAIT_POLICIES)
    timeout: float = option(0.0, "give up after this many seconds (0: never)")
    exit_with_parent: bool = option(False, "stop when the process that started this one ends (a dropped "
                                           "ssh/adb session)")
    indexed_outputs: bool = option(False, "name output files DIR/output<i>.npy (the JSON maps names to "
                                          "files): what `run` on a device asks for, so no tensor name "
                                          "becomes a path that crosses the link")
