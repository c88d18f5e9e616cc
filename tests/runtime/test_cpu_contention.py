"""Issue 20, under load: the `auto` wait policy runs each inference on the cores other
processes leave free (mace/util/cpu_contention.py). The reference for "others are busy" is a
real competing process spinning on this machine."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from mace.util.cpu_contention import MIN_SAMPLES, SAMPLE_EVERY_S, WINDOW_S, Contention, Runnable
from tests.runtime.test_cpu_wait_and_affinity import pool_or_skip, python

linux = pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="/proc (Linux) only")


class Machine:
    """A fake clock and runnable count: each check (a run) is `step` after the last one and
    samples `others`."""

    def __init__(self, cores: int, step: float = 1.01 * WINDOW_S / MIN_SAMPLES):
        self.cores, self.t, self.step, self.others = cores, 0.0, step, 0

    def contention(self) -> Contention:
        self.c = Contention(cores=self.cores, probe=lambda: self.others, clock=lambda: self.t)
        return self.c

    def check(self, want: int) -> int:
        self.t += self.step
        return self.c.threads(want)


def window(c: Contention, m: Machine, others, want: int) -> int:
    """One window's MIN_SAMPLES checks with `others` runnable (one value per check)."""
    assert len(others) == MIN_SAMPLES
    got = None
    for o in others:
        m.others = o
        got = m.check(want)
    return got


def test_threads_are_the_cores_others_leave_free():
    m = Machine(4)
    c = m.contention()
    assert m.check(4) == 4                                    # no window measured yet
    assert window(c, m, [0, 1, 0], 4) == 4                 # a kernel thread's blip takes no core
    assert window(c, m, [3, 2, 3], 4) == 1                 # ~3 others runnable: 3 cores taken
    assert window(c, m, [1, 1, 2], 4) == 3
    assert m.check(2) == 2                                    # never more than the run asked for
    assert window(c, m, [9, 9, 9], 4) == 1                 # at least one thread


def test_the_answer_holds_until_a_window_is_complete():
    m = Machine(2, step=WINDOW_S)   # each check a whole window long, but MIN_SAMPLES are needed
    m.contention()
    m.others = 1
    assert [m.check(2) for _ in range(MIN_SAMPLES)] == [2] * (MIN_SAMPLES - 1) + [1]


def test_runs_closer_than_the_sample_interval_reuse_the_last_answer():
    """A sample costs up to ~150 us on a loaded machine: a 20 us run must not pay it each time."""
    clock, probes = [0.0], []

    def probe():
        probes.append(clock[0])
        return 1   # one other process runnable: on 2 cores, 1 left to us
    c = Contention(cores=2, probe=probe, clock=lambda: clock[0])
    answers = []
    for _ in range(2000):   # 2000 runs of 0.1 ms each: 0.2 s, two windows
        answers.append(c.threads(2))
        clock[0] += 1e-4
    assert len(probes) == pytest.approx(0.2 / SAMPLE_EVERY_S, abs=2), len(probes)
    assert min(b - a for a, b in zip(probes, probes[1:])) >= SAMPLE_EVERY_S * 0.999
    assert answers[0] == 2 and answers[-1] == 1   # the window's answer still reaches every run


def test_without_proc_the_run_gets_what_it_asked_for():
    assert Contention(cores=2, probe=lambda: None).threads(2) == 2


def test_our_own_running_threads_are_not_counted(tmp_path, monkeypatch):
    """/proc as the kernel writes it: 4 runnable threads, 2 of them ours (one with a space
    and a ')' in its name), one of ours asleep."""
    from mace.util import cpu_contention

    (tmp_path / "loadavg").write_text("1.02 0.80 0.61 4/120 5555\n")
    for tid, name, state in (("10", "python", "R"), ("11", "numba (w) 1)", "R"), ("12", "python", "S")):
        (tmp_path / "task" / tid).mkdir(parents=True)
        (tmp_path / "task" / tid / "stat").write_text(f"{tid} ({name}) {state} 1 2 3 4\n")
    monkeypatch.setattr(cpu_contention, "_LOADAVG", tmp_path / "loadavg")
    monkeypatch.setattr(cpu_contention, "_TASKS", tmp_path / "task")
    assert Runnable()() == 2
    (tmp_path / "loadavg").write_text("1.02 0.80 0.61 1/120 5555\n")
    assert Runnable()() == 0   # the caller alone


def test_a_thread_of_ours_started_after_the_list_was_read_is_ours(tmp_path, monkeypatch):
    """The OpenMP worker starts in the first split step, after the first sample read our
    thread list: running, it is ours at once, not a competitor until the next refresh. A
    runnable thread that is not ours still counts after the list is read again."""
    from mace.util import cpu_contention

    def thread(tid, state):
        (tmp_path / "task" / tid).mkdir(parents=True, exist_ok=True)
        (tmp_path / "task" / tid / "stat").write_text(f"{tid} (python) {state} 1 2 3 4\n")

    thread("10", "R")
    (tmp_path / "loadavg").write_text("1.02 0.80 0.61 1/120 5555\n")
    monkeypatch.setattr(cpu_contention, "_LOADAVG", tmp_path / "loadavg")
    monkeypatch.setattr(cpu_contention, "_TASKS", tmp_path / "task")
    probe = Runnable(refresh=64)
    assert probe() == 0   # the list read: thread 10 alone
    thread("11", "R")     # our new worker, spinning
    (tmp_path / "loadavg").write_text("1.02 0.80 0.61 2/120 5555\n")
    assert [probe() for _ in range(5)] == [0] * 5
    (tmp_path / "loadavg").write_text("1.02 0.80 0.61 3/120 5555\n")   # and someone else's
    assert [probe() for _ in range(5)] == [1] * 5


@linux
def test_a_busy_competitor_is_seen():
    probe = Runnable()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        seen = [probe() for _ in range(50)]
    finally:
        spinner.kill()
        spinner.wait()
    assert sum(seen) / len(seen) >= 0.7, seen   # the spinner: runnable whenever we look


SIZED_RUN = """
    import json, subprocess, sys, time
    import numpy as np
    from mace.ops.fast import _pool
    p = _pool.process_pool("auto")   # the pool started under the engine option cpu_wait_policy: auto
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
    from mace.ops.fast import _pool
    p = _pool.process_pool("auto")   # the pool started under the engine option cpu_wait_policy: auto
    if p is None or p.width() < 2:
        print(json.dumps({"pool": False})); raise SystemExit
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 64), np.float32), rng.standard_normal((64, 80), np.float32)
    out = np.zeros((96, 80), np.float32)
    from mace.ops.fast.compute import ComputeContext
    step = ComputeContext().matmul(a, b, out)
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
