"""How the compute pool's threads wait between parallel loops (`--cpu_wait_policy`).

The pool is numba's OpenMP layer, GNU libgomp. Between two loops of a run (the Python
dispatch of the next op, a serial op) and at each loop's closing barrier its idle
threads either spin or sleep on a futex; libgomp decides that once, from its
environment, when the library loads (OMP_WAIT_POLICY, GOMP_SPINCOUNT). So the policy is
fixed for the process when the pool starts (mace/ops/fast/_pool.py calls `apply` first,
with the wait policy of the first engine's ComputeContext, mace/ops/fast/compute.py) and
cannot change afterwards: what it started with is the one process-wide fact kept here.

Measured on the shared 2-core development machine (SqueezeNet, 2 threads, one competing
busy process beside other developers' work, load average 11-13; docs/performance.md,
"Under load", has the script's tables): libgomp's own default (spin 300,000 iterations,
milliseconds, before sleeping) ran 750-900 ms a run against onnxruntime's 115 ms, `spin`
500-1,300 ms: a spinning thread holds the core that the thread with the remaining work
(or the other process) needs, and the kernel cannot move work onto a core that never
goes idle. `passive` ran 11-25 ms, `short` 28 ms. `short` spins 2,000 iterations (a
pause instruction each: ~0.05-0.1 ms, about one op's Python dispatch) before sleeping,
for machines where the futex wake-up between loops would show.
benchmarks/bench_wait.py shows where the time goes (MobileNet v2 160x160, 20 runs, same
machine and load): the work takes ~0.2 CPU s under `passive` or `short` (15-42 ms a run),
while under `spin` or libgomp's default both threads burn ~1.8-2.3 CPU s each (1.6-2.2 s
a run). OpenBLAS's own threads stay idle during pooled runs (the pool holds OpenBLAS at
one thread); without the pool (MACE_NO_POOL=1) their spin costs the same way (1.45 s a
run; 0.59 s with OPENBLAS_THREAD_TIMEOUT=4).

    auto     spin a few milliseconds, and run each inference on the cores other processes
             leave free (mace/util/cpu_contention.py; the default)
    passive  sleep as soon as a thread has no work
    short    spin briefly, then sleep
    spin     spin until the next loop (OMP_WAIT_POLICY=ACTIVE): a dedicated, quiet machine

Measured again on a quiet 2-core VM (load average ~1, no other developers' work; each
policy in its own run of benchmarks/bench_cpu.py --load, 2 threads): `passive` ran
SqueezeNet in 21 ms and ResNet-50 in 192 ms against onnxruntime's 7 and 73 ms: with
nothing else running, the idle virtual CPU halts and every loop pays for waking it.
Spinning 100,000 iterations (about 5 ms of pause instructions on that CPU) ran them in
9 and 104 ms; 10,000 and 30,000 were in between (26 / 126 ms, 14 / 105 ms). With one busy
competing process the order reverses (`passive` 12 / 177 ms, 100,000 spins 54 / 276 ms),
which `auto` answers by running on one thread while the competitor holds the other core.
At other hours of the same day `passive` ran level with spinning (10 / 100 ms): how slowly
the hypervisor wakes a halted virtual CPU varies, and spinning is never the slower quiet.
"""
from __future__ import annotations

import os
from pathlib import Path

POLICIES = {
    "auto": {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": "100000"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"},
    "short": {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": "2000"},
    "spin": {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "infinite"},
}
DEFAULT = "auto"
_started: str | None = None     # what the OpenMP layer started with ("environment": the user's own)


def environment(name: str) -> dict:
    """The libgomp environment of policy `name` (None values: unset)."""
    return dict(POLICIES[name])


def conflict(name: str | None) -> str | None:
    """A note when the pool already runs under another policy than `name` (None: none asked)."""
    if name is None or _started is None or _started == name:
        return None
    return (f"cpu_wait_policy {name}: the compute pool already started with "
            f"'{_started}' in this process; it keeps that one")


def apply(name: str | None = None) -> str:
    """Set libgomp's environment for policy `name` (the engine's `cpu_wait_policy` option that
    starts the pool); called once, just before the pool loads libgomp. Without one,
    OMP_WAIT_POLICY / GOMP_SPINCOUNT set by the user are kept ("environment"); else the
    default. Returns the policy the pool starts with."""
    global _started
    if _started is not None:
        return _started
    if name is not None and name not in POLICIES:
        raise ValueError(f"cpu_wait_policy '{name}': expected one of {', '.join(POLICIES)}")
    user = any(k in os.environ for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"))
    name = name or ("environment" if user else DEFAULT)
    if name != "environment":
        for key, value in POLICIES[name].items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if libgomp_loaded():   # someone (another library) loaded it first: it read what it found
        name = "environment"
    _started = name
    return name


def started() -> str | None:
    """The policy the pool started with; None before it starts."""
    return _started


def adaptive() -> bool:
    """Whether runs size themselves to the cores others leave free (the `auto` policy)."""
    return _started == "auto"


def libgomp_loaded() -> bool:
    try:
        return "libgomp" in Path("/proc/self/maps").read_text()
    except OSError:
        return False
