"""`--cpu_wait_policy`, shared by `run` and `benchmark` (on the host and, through the device
runner, on boards; docs/cli.md)."""
from __future__ import annotations

from mace.util.omp_wait import DEFAULT as DEFAULT_WAIT_POLICY, POLICIES as WAIT_POLICIES


def add_wait_policy(p) -> None:
    p.add_argument("--cpu_wait_policy", choices=tuple(WAIT_POLICIES), default=None,
                   help="how the CPU compute pool's idle threads wait between parallel loops: auto (spin "
                        "a few ms, and run each inference on the cores other processes leave free), "
                        "passive (sleep at once), short (spin briefly, then sleep), spin (never sleep: "
                        "a dedicated, quiet machine); default "
                        f"{DEFAULT_WAIT_POLICY}, or OMP_WAIT_POLICY/GOMP_SPINCOUNT when set")
