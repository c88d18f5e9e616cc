"""How many of our cores other processes keep busy: the `auto` wait policy's thread count.

Measured on a 2-core VM (docs/performance.md, "Under load"): a pool whose idle threads
spin a few milliseconds runs level with one that sleeps at once on a quiet machine (and
up to 2x faster when the hypervisor is slow to wake a halted virtual CPU), but with one
busy competing process the spinner holds the core the competitor needs and a run takes
up to 3x longer. So `auto` spins, and runs each inference on the cores others leave
free (at least one): one thread never waits at a barrier, so a descheduled sibling
cannot stall it.

"Others" is the number of runnable threads that are not ours, sampled before each run
(/proc/loadavg's running count less our threads in state R, read before and after it so
a thread of ours going to sleep or waking meanwhile counts as ours) and averaged over
windows of at least WINDOW_S and MIN_SAMPLES runs: a single sample sees a kernel thread
now and then, a competitor is there in nearly every one. CPU time was tried first
(/proc/stat busy ticks less our process's): on a VM our own threads' sleeping and waking
showed as a third to half a core of someone else's. Linux only; elsewhere every run gets
the threads it asked for. A sample costs ~20-60 us on a quiet machine and up to ~150 us on a
loaded one, more than a whole run of a wake-word head (20-50 us): so runs closer together than
SAMPLE_EVERY_S reuse the last answer instead of sampling (at most ~100 samples a second,
still ~10 per window).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

WINDOW_S = 0.1
MIN_SAMPLES = 3
SAMPLE_EVERY_S = 0.01
BUSY_CORE = 0.5    # others runnable this much of the time on average take a core
_LOADAVG = Path("/proc/loadavg")
_TASKS = Path("/proc/self/task")


def _running(paths: list) -> set:
    out = set()
    for path in paths:
        try:
            with open(path, "rb") as f:
                stat = f.read()
        except OSError:   # the thread ended
            continue
        if stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] == b"R":
            out.add(path)
    return out


class Runnable:
    """Samples of other processes' runnable threads (our thread list cached, refreshed
    every `refresh` samples: numba's and OpenBLAS's threads start once). A sample that sees
    others reads our list again first: a thread of ours started since (the OpenMP team's
    worker, created by the first split step after the list was read; a thread pool a library
    starts later) would count as another process's until the next refresh, and a run sized
    to one thread for its whole window (openWakeWord's timer head at two threads, the first
    second after an onnxruntime session in the same process: 48 us a run, not 26)."""

    def __init__(self, refresh: int = 64):
        self.refresh, self._n, self._paths = refresh, 0, []

    def __call__(self) -> int | None:
        try:
            fresh = self._n % self.refresh == 0
            if fresh:
                self._read_threads()
            self._n += 1
            others = self._others()
            if others and not fresh:
                self._read_threads()
                others = self._others()
        except (OSError, ValueError, IndexError):
            return None
        return others

    def _read_threads(self) -> None:
        self._paths = [os.path.join(e.path, "stat") for e in os.scandir(_TASKS)]

    def _others(self) -> int:
        with open(_LOADAVG, "rb") as f:
            first = f.read()
        system = int(first.split()[3].split(b"/")[0])
        if system <= 1:   # the caller alone: nothing else runnable
            return 0
        before = _running(self._paths)
        with open(_LOADAVG, "rb") as f:
            system = int(f.read().split()[3].split(b"/")[0])
        ours = before | _running(self._paths)
        return max(0, system - max(len(ours), 1))


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Contention:
    """Threads a run should use: `want`, less the cores others keep busy (at least 1)."""

    def __init__(self, cores: int | None = None, probe=None, clock=time.monotonic):
        self.cores = cores or usable_cores()
        self._probe = probe or Runnable()
        self._clock = clock
        self._start: float | None = None   # the window's first sample
        self._samples: list = []
        self._last: float | None = None    # when the last sample was taken
        self.free: int | None = None       # cores left to us over the last window

    def threads(self, want: int) -> int:
        if self._last is not None and self._clock() - self._last < SAMPLE_EVERY_S:
            return self._answer(want)
        others = self._probe()
        if others is None:
            return want
        t = self._last = self._clock()
        if self._start is None:
            self._start = t
        self._samples.append(others)
        if t - self._start >= WINDOW_S and len(self._samples) >= MIN_SAMPLES:
            mean = sum(self._samples) / len(self._samples)
            self.free = max(1, self.cores - int(mean + 1 - BUSY_CORE))
            self._start, self._samples = t, []
        return self._answer(want)

    def _answer(self, want: int) -> int:
        return want if self.free is None else max(1, min(want, self.free))
