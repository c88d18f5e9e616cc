"""CPU threads and core pinning of the CPU runtime (`--omp_num_threads`, `--cpu_affinity_policy`).

`limit_threads` sets the BLAS library's thread count (numpy's OpenBLAS) through
threadpoolctl for the whole process. That count is the engine's parallelism: OpenBLAS's
own threads, or, where the fast kernels run on the compute pool (mace/ops/fast/_pool.py),
the pool's size during each run (OpenBLAS is then held at one thread).
`pin_threads` follows MACE's CPUAffinityPolicy: 0 none, 1 big cores only,
2 little cores only, 3 high performance (= big), 4 power save (= little). Core
speed is each core's cpufreq maximum; where every core is alike (or the OS
gives no frequencies) "big" and "little" are all cores. Every thread of the
process is pinned (the BLAS workers exist once numpy is loaded), where the OS
allows it (Linux sched_setaffinity); elsewhere the policy is accepted and ignored.
How the compute pool's idle threads wait (`--cpu_wait_policy`: auto, passive, short, spin;
mace/util/omp_wait.py, where the measurements are) is an engine option, `cpu_wait_policy`
(its ComputeContext, mace/ops/fast/compute.py): `wait_options` builds it from the flag and
`wait_notes` says when the pool had already started under another one (libgomp reads its
policy once per process).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from mace.util import omp_wait

POLICIES = {0: "none", 1: "big_only", 2: "little_only", 3: "high_performance", 4: "power_save"}
_limiter = None   # keeps the threadpoolctl limit alive


def thread_limit(num_threads: int):
    """BLAS threads for a block (`with thread_limit(n):`); -1 or 0: the library default."""
    if not num_threads or num_threads < 0:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=num_threads)


def limit_threads(num_threads: int) -> None:
    """Set the BLAS thread pools to `num_threads` (<= 0: leave the library default)."""
    global _limiter
    if num_threads and num_threads > 0:
        from threadpoolctl import threadpool_limits
        _limiter = threadpool_limits(limits=int(num_threads))


def wait_options(policy: str | None) -> dict | None:
    """The engine options of `--cpu_wait_policy` (None: the engine's default, or the user's own
    OMP_WAIT_POLICY / GOMP_SPINCOUNT)."""
    if policy is None:
        return None
    if policy not in omp_wait.POLICIES:
        raise ValueError(f"cpu_wait_policy '{policy}': expected one of {', '.join(omp_wait.POLICIES)}")
    return {"cpu_wait_policy": policy}


def wait_notes(engine) -> list:
    """Why `engine` does not get the wait policy it asked for (the pool started before under
    another); [] for engines without a compute context (DSP backends)."""
    compute = getattr(engine, "compute", None)
    return compute.notes() if compute is not None else []


def _max_freq(cpu: int) -> int:
    try:
        return int(Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq").read_text())
    except (OSError, ValueError):
        return 0


def policy_cores(policy: int, num_threads: int = -1, cpus=None) -> list:
    """The cores `policy` picks among `cpus` (default: those this process may use), fastest first."""
    if policy not in POLICIES:
        raise ValueError(f"cpu_affinity_policy {policy}: expected one of {sorted(POLICIES)} "
                         f"({', '.join(POLICIES.values())})")
    if cpus is None:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if policy == 0 or not cpus:
        return list(cpus)
    freq = {c: _max_freq(c) for c in cpus}
    want = max(freq.values()) if policy in (1, 3) else min(freq.values())
    chosen = [c for c in cpus if freq[c] == want]
    return chosen[:num_threads] if num_threads and num_threads > 0 else chosen


def pin_threads(policy: int, num_threads: int = -1) -> list:
    """Pin every thread of this process to the policy's cores; returns them ([] when not pinned)."""
    cores = policy_cores(policy, num_threads)
    if policy == 0 or not cores or not hasattr(os, "sched_setaffinity"):
        return []
    tasks = Path("/proc/self/task")
    tids = [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [0]
    pinned = []
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
            pinned.append(tid)
        except OSError:   # a thread that just ended, or a container that forbids it
            continue
    return cores if pinned else []
