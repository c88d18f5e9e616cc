"""How many of our cores other processes keep busy: the `auto` wait policy's thread count.

Measured on a 2-core VM (docs/performance.md, "Under load"): a pool whose idle threads
spin a few milliseconds runs level with one that sleeps at once on a quiet machine (and
up to 2x faster when the hypervisor is slow to wake a halted virtual CPU), but with one
busy competing process the spinner holds the core the competitor needs and a run takes
up to 3x longer. So `auto` spins, and runs each inference on the cores others leave
free (at least one): one thread never waits at a barrier, so a descheduled sibling
cannot stall it.

"Others" is CPU time, not a snapshot: over windows of at least WINDOW_S, the machine's
busy time (/proc/stat: user, nice, system, irq, softirq, steal, so a hypervisor taking
our virtual CPUs counts too) less our own process's (os.times), in cores. A snapshot of
runnable threads (/proc/loadavg) saw a kernel thread or a spinning thread of our own that
had just gone to sleep in a third of the checks on a quiet machine. Linux only; elsewhere
every run gets the threads it asked for. Between windows a check costs one clock read.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

WINDOW_S = 0.1     # /proc/stat counts in 10 ms ticks: shorter windows would be mostly rounding
BUSY_CORE = 0.5    # others busy this much of a core on average take it away
_STAT = Path("/proc/stat")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_ticks() -> tuple | None:
    """(all CPUs' ticks, busy ticks, our process's ticks) so far; None where /proc cannot say."""
    try:
        with open(_STAT, "rb") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    t = os.times()
    return (sum(fields), user + nice + system + irq + softirq + steal,
            (t.user + t.system) * _TICK)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Contention:
    """Threads a run should use: `want`, less the cores others keep busy (at least 1)."""

    def __init__(self, cores: int | None = None, probe=cpu_ticks, clock=time.monotonic,
                 system_cores: int | None = None):
        self.cores = cores or usable_cores()
        self.system_cores = system_cores or os.cpu_count() or self.cores
        self._probe, self._clock = probe, clock
        self._last: tuple | None = None     # (time, ticks) at the window's start
        self.free: int | None = None        # cores left to us over the last window

    def others(self, before: tuple, now: tuple) -> float:
        """Cores others kept busy on average between two cpu_ticks() samples."""
        total = now[0] - before[0]
        if total <= 0:
            return 0.0
        busy = (now[1] - before[1]) - (now[2] - before[2])
        return max(0.0, busy) / total * self.system_cores

    def threads(self, want: int) -> int:
        t = self._clock()
        if self._last is None or t - self._last[0] >= WINDOW_S:
            ticks = self._probe()
            if ticks is None:
                return want
            if self._last is not None:
                taken = int(self.others(self._last[1], ticks) + 1 - BUSY_CORE)
                self.free = max(1, self.cores - taken)
            self._last = (t, ticks)
        return want if self.free is None else max(1, min(want, self.free))
