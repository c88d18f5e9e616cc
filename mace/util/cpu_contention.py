"""How many of our cores other processes want right now: the `auto` wait policy's thread count.

Measured on a 2-core VM (docs/performance.md, "Under load"): a pool whose idle threads
sleep at once (`passive`) runs SqueezeNet 2-3x slower than onnxruntime on a quiet machine,
because every loop wakes a halted virtual CPU; a pool that spins a few milliseconds runs
level, but with one busy competing process the spinner holds the core the competitor
needs and a run takes 3x longer. So `auto` spins, and before each run asks how many
cores are free: others' runnable threads (the system's runnable count minus ours) take
cores away, and the run gets the rest (at least one thread). One thread never waits at a
barrier, so a descheduled sibling cannot stall it.

Linux only (/proc); elsewhere every run gets the threads it asked for. The check reads
/proc/loadavg and our own threads' states (~50 us); the answer changes only when two
checks in a row agree, so a daemon waking for a moment does not halve a run.
"""
from __future__ import annotations

import os
from pathlib import Path

_TASKS = Path("/proc/self/task")
_LOADAVG = Path("/proc/loadavg")


def runnable_others() -> int | None:
    """Runnable threads of other processes now; None where /proc cannot say."""
    try:
        system = int(_LOADAVG.read_text().split()[3].split("/")[0])
        if system <= 1:   # the caller alone (~10 us): no need to look at our threads
            return 0
        ours = 0
        for task in os.scandir(_TASKS):
            try:
                stat = Path(task.path, "stat").read_text()
            except OSError:   # the thread ended while we looked
                continue
            ours += stat[stat.rindex(")") + 2] == "R"
    except (OSError, ValueError, IndexError):
        return None
    return max(0, system - ours)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Contention:
    """Threads a run should use: `want`, less the cores others keep busy (at least 1)."""

    def __init__(self, cores: int | None = None, probe=runnable_others):
        self.cores = cores or usable_cores()
        self._probe = probe
        self._last: int | None = None   # the previous check's answer
        self.free: int | None = None    # the answer in force (two checks agreed)

    def threads(self, want: int) -> int:
        others = self._probe()
        if others is None:
            return want
        free = max(1, self.cores - others)
        if self.free is None or free == self._last:
            self.free = free
        self._last = free
        return max(1, min(want, self.free))
