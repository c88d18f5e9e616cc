#!/usr/bin/env python3
"""What the CPU engine's threads do while they wait: CPU seconds per thread over N runs.

    python benchmarks/bench_wait.py                     # every --cpu_wait_policy, + libgomp's own
    python benchmarks/bench_wait.py --load --runs 40    # beside one competing busy process

Each policy runs in a child process of its own (libgomp reads its wait policy once, as it
loads): MobileNet v2 (mace/testing/mobilenet_v2.py, 160x160, random weights) on 2
threads, N timed runs, then each thread's user+system CPU time over those runs (from
/proc/self/task/*/stat) and over the half second after the last one. A thread whose CPU
time is near the wall time spins while it waits; the engine's work is the same in every
row. Rows `nopool` run without the compute pool (MACE_NO_POOL=1: OpenBLAS's own threads
do the GEMMs), with OpenBLAS's default thread timeout and with OPENBLAS_THREAD_TIMEOUT=4
(its shortest busy-wait). Linux only.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROWS = {   # label: (--cpu_wait_policy or None, extra environment)
    "auto": ("auto", {}), "passive": ("passive", {}), "short": ("short", {}), "spin": ("spin", {}),
    "gomp (libgomp's default)": (None, {"GOMP_SPINCOUNT": "300000"}),
    "nopool, OpenBLAS default timeout": (None, {"MACE_NO_POOL": "1"}),
    "nopool, OPENBLAS_THREAD_TIMEOUT=4": (None, {"MACE_NO_POOL": "1", "OPENBLAS_THREAD_TIMEOUT": "4"}),
}
LOAD_CMD = [sys.executable, "-c", "while True: pass"]


def child(policy: str | None, runs: int, threads: int) -> dict:
    import numpy as np

    from mace.ops.fast import _pool
    from mace.runtime.affinity import limit_threads

    limit_threads(threads)
    if policy:   # the pool is the process's: started here, under this policy
        _pool.process_pool(policy)
    from mace.onnx_backend import prepare
    from mace.util import omp_wait as _wait
    from mace.testing.mobilenet_v2 import INPUT_NAME, mobilenet_v2

    feed = {INPUT_NAME: np.random.default_rng(0).standard_normal((1, 3, 160, 160)).astype(np.float32)}
    engine = prepare(mobilenet_v2(seed=3, resolution=160, classes=100), feed)
    for _ in range(3):
        engine.run(feed)
    before, t = cpu_by_thread(), time.perf_counter()
    for _ in range(runs):
        engine.run(feed)
    wall, after = time.perf_counter() - t, cpu_by_thread()
    time.sleep(0.5)
    idle = cpu_by_thread()
    main = os.getpid()
    threads_cpu = sorted(((after[k] - before.get(k, 0.0), idle.get(k, after[k]) - after[k], k == main)
                          for k in after), key=lambda r: (not r[2], -r[0]))
    return {"wall_s": wall, "started": _wait.started() or "no pool", "threads": threads_cpu}


def cpu_by_thread() -> dict:
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:   # a thread that just ended
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def measure(label: str, runs: int, threads: int) -> dict:
    policy, extra = ROWS[label]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(extra, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, __file__, "--child", json.dumps([policy, runs, threads])],
                       env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        return {"error": (r.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def row(label: str, res: dict, runs: int) -> str:
    if "error" in res:
        return f"| {label} | FAILED: {res['error']} | | | |"
    main = [c for c, _, m in res["threads"] if m]
    others = [c for c, _, m in res["threads"] if not m and c > 0.005]
    after = sum(i for _, i, _ in res["threads"])
    return (f"| {label} ({res['started']}) | {1000 * res['wall_s'] / runs:.1f} | "
            f"{main[0] if main else 0:.2f} | {', '.join(f'{c:.2f}' for c in others) or '0'} | {after:.2f} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=40, help="timed runs per policy (40)")
    p.add_argument("--threads", type=int, default=2, help="engine threads (2)")
    p.add_argument("--load", action="store_true", help="beside one competing busy process")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(*json.loads(args.child))))
        return 0
    load = subprocess.Popen(LOAD_CMD) if args.load else None
    try:
        print(f"MobileNet v2 160x160, {args.threads} threads, {args.runs} runs per row"
              + (", one competing busy process" if load else "")
              + f"; load average {' / '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
        print("| policy (as started) | ms per run | main thread CPU s | other threads' CPU s "
              "| all threads' CPU s in the 0.5 s after |\n|---|---|---|---|---|", flush=True)
        for label in ROWS:
            print(row(label, measure(label, args.runs, args.threads), args.runs), flush=True)
    finally:
        if load is not None:
            load.kill()
            load.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
