"""Issue 20, under load: the `auto` wait policy runs each inference on the cores other
processes leave free (mace/util/cpu_contention.py). The reference for "others are busy" is a
real competing process spinning on this machine."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from mace.util.cpu_contention import Contention, cpu_ticks
from tests.runtime.test_cpu_wait_and_affinity import pool_or_skip, python

linux = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="/proc (Linux) only")


class Machine:
    """A fake clock and /proc/stat: `tick(seconds, others=cores busy, ours=cores busy)`."""

    def __init__(self, cores: int):
        self.cores, self.t, self.ticks = cores, 0.0, [0.0, 0.0, 0.0]

    def tick(self, seconds: float, others: float = 0.0, ours: float = 0.0):
        self.t += seconds
        self.ticks[0] += 100 * seconds * self.cores
        self.ticks[1] += 100 * seconds * (others + ours)
        self.ticks[2] += 100 * seconds * ours

    def contention(self) -> Contention:
        return Contention(cores=self.cores, system_cores=self.cores, probe=lambda: tuple(self.ticks),
                          clock=lambda: self.t)


def test_threads_are_the_cores_others_leave_free():
    m = Machine(4)
    c = m.contention()
    assert c.threads(4) == 4                      # no window measured yet
    m.tick(0.2, others=0.1, ours=3.9)
    assert c.threads(4) == 4                      # a daemon's blip takes no core
    m.tick(0.2, others=2.7, ours=1.3)
    assert c.threads(4) == 1                      # 2.7 cores busy elsewhere: 3 taken
    m.tick(0.05, others=4.0)
    assert c.threads(4) == 1                      # inside a window: the last answer holds
    m.tick(0.3, others=1.0, ours=3.0)   # this window: 1.4 cores elsewhere on average
    assert c.threads(4) == 3
    assert c.threads(2) == 2                      # never more than the run asked for
    m.tick(0.2, others=6.0)
    assert c.threads(4) == 1                      # at least one thread


def test_our_own_spinning_threads_are_not_contention():
    m = Machine(2)
    c = m.contention()
    c.threads(2)
    m.tick(0.5, ours=2.0)   # both our threads busy (running or spinning) the whole window
    assert c.threads(2) == 2


def test_without_proc_the_run_gets_what_it_asked_for():
    assert Contention(cores=2, probe=lambda: None).threads(2) == 2


@linux
def test_a_busy_competitor_is_seen_as_a_core():
    c = Contention()
    before = cpu_ticks()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        after = cpu_ticks()
    finally:
        spinner.kill()
        spinner.wait()
    assert after is not None and c.others(before, after) >= 0.7, c.others(before, after)


SIZED_RUN = """
    import json, subprocess, sys, time
    import numpy as np
    from mace.runtime.affinity import set_wait_policy
    set_wait_policy("auto")
    from mace.ops.fast import _pool
    p = _pool.pool()
    if p is None or p.width() < 2:
        print(json.dumps({"pool": False})); raise SystemExit
    def run_threads():
        time.sleep(0.15)   # a window of the contention measure
        blas = p.enter()
        try:
            return p._numba_threads
        finally:
            p.leave(blas)
    # one competitor per usable core: whatever else runs, none is left free
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(p._contention.cores)]
    time.sleep(0.5)
    try:
        loaded = [run_threads() for _ in range(5)]
    finally:
        for s in spinners:
            s.kill()
    print(json.dumps({"pool": True, "loaded": loaded, "width": p.width()}))
"""


@linux
def test_auto_runs_on_one_thread_while_competitors_hold_the_cores():
    facts = pool_or_skip(python(SIZED_RUN))
    assert facts["loaded"][-1] == 1, facts


@linux
def test_auto_gives_the_same_outputs_on_one_thread():
    """A kernel bound for two parts runs them in turn on one thread: same bytes."""
    code = """
    import json
    import numpy as np
    from mace.runtime.affinity import set_wait_policy
    set_wait_policy("auto")
    from mace.ops.fast import _pool
    p = _pool.pool()
    if p is None or p.width() < 2:
        print(json.dumps({"pool": False})); raise SystemExit
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 64), np.float32), rng.standard_normal((64, 80), np.float32)
    out = np.zeros((96, 80), np.float32)
    step = _pool.matmul(a, b, out)
    results = []
    for free in (2, 1):
        p._contention = type("Fixed", (), {"threads": lambda self, want, f=free: min(want, f)})()
        out[:] = 0
        step()
        results.append(out.tobytes().hex())
    print(json.dumps({"pool": True, "same": results[0] == results[1],
                      "close": bool(np.allclose(out, a @ b, atol=1e-4))}))
    """
    facts = pool_or_skip(python(code))
    assert facts["same"] and facts["close"]
