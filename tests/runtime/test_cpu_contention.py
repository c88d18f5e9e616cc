"""Issue 20, under load: the `auto` wait policy runs each inference on the cores other
processes leave free (mace/util/cpu_contention.py). The reference for "others are busy" is a
real competing process spinning on this machine."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from mace.util.cpu_contention import Contention, runnable_others
from tests.runtime.test_cpu_wait_and_affinity import pool_or_skip, python

linux = pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="/proc (Linux) only")


def probes(*values):
    it = iter(values)
    return lambda: next(it)


def test_threads_are_what_others_leave_free():
    c = Contention(cores=4, probe=probes(0, 3, 3, 2, 2, 9, 9))
    assert c.threads(4) == 4                  # nothing else runs
    assert c.threads(4) == 4                  # one check alone does not change the answer
    assert c.threads(4) == 1                  # two agree: 3 of 4 cores busy
    assert c.threads(4) == 1                  # 2 busy once: not yet
    assert c.threads(4) == 2                  # twice: 2 free
    assert c.threads(2) == 2
    assert c.threads(8) == 1                  # more busy than cores: still one thread


def test_threads_never_exceed_what_the_run_asked_for():
    c = Contention(cores=8, probe=probes(0, 0))
    assert c.threads(2) == 2 and c.threads(3) == 3


def test_without_proc_the_run_gets_what_it_asked_for():
    assert Contention(cores=2, probe=lambda: None).threads(2) == 2


@linux
def test_a_busy_competitor_is_seen():
    assert runnable_others() is not None
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        seen = [runnable_others() for _ in range(20)]
    finally:
        spinner.kill()
        spinner.wait()
    assert max(seen) >= 1, seen   # the spinner is runnable whenever we look


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
