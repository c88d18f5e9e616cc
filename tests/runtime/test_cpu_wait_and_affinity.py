"""Issue 20, under load: `--cpu_wait_policy` reaches the compute pool's OpenMP library, and
`--cpu_affinity_policy` pins the engine's threads to the right cores. Each check runs in a
fresh subprocess: libgomp reads its wait policy once, as it loads, and pinning changes the
whole process. libgomp's own report of its settings (OMP_DISPLAY_ENV) is the reference."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from mace.runtime import affinity
from tests.cli_helpers import ROOT, cli, workdir

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux thread affinity only")


def python(code: str, env_extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_extra or {}, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def gomp_settings(stderr: str) -> dict:
    """OMP_DISPLAY_ENV=VERBOSE's lines `  NAME = 'value'` as a dict."""
    out = {}
    for line in stderr.splitlines():
        name, eq, value = line.strip().partition(" = ")
        if eq:
            out[name] = value.strip("'")
    return out


def pool_or_skip(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    if not facts["pool"]:
        pytest.skip("no compute pool here (numba's OpenMP layer or 64-bit OpenBLAS missing)")
    return facts


START_POOL = """
    import json
    from mace.ops.fast.compute import ComputeContext
    from mace.runtime.affinity import wait_options
    from mace.util import omp_wait as _wait
    compute = ComputeContext.from_options(wait_options({policy!r}))   # as run/benchmark open an engine
    pool = compute.pool
    print(json.dumps({{"pool": pool is not None, "started": _wait.started(), "notes": compute.notes()}}))
"""


@pytest.mark.parametrize("policy, wait, spins", [
    ("auto", None, "100000"), ("passive", "PASSIVE", "0"), ("short", None, "2000"), ("spin", "ACTIVE", str(2**64 - 1))])
def test_wait_policy_is_what_libgomp_reads(policy, wait, spins):
    r = python(START_POOL.format(policy=policy), {"OMP_DISPLAY_ENV": "VERBOSE"})
    facts = pool_or_skip(r)
    seen = gomp_settings(r.stderr)
    assert facts["started"] == policy and facts["notes"] == []
    assert seen["GOMP_SPINCOUNT"] == spins
    if wait:
        assert seen["OMP_WAIT_POLICY"] == wait


def test_default_is_auto_and_a_users_environment_is_kept():
    r = python(START_POOL.format(policy=None), {"OMP_DISPLAY_ENV": "VERBOSE"})
    facts = pool_or_skip(r)
    seen = gomp_settings(r.stderr)
    assert facts["started"] == "auto" and seen["GOMP_SPINCOUNT"] == "100000"   # libgomp's own: 300000
    # no flag, but the user's own libgomp settings: kept as they are
    r = python(START_POOL.format(policy=None), {"OMP_DISPLAY_ENV": "VERBOSE", "GOMP_SPINCOUNT": "12345"})
    facts = pool_or_skip(r)
    assert facts["started"] == "environment" and gomp_settings(r.stderr)["GOMP_SPINCOUNT"] == "12345"


def test_a_second_policy_after_the_pool_started_is_a_note():
    code = START_POOL + """
    late = ComputeContext.from_options(wait_options("spin"))   # a second engine asking for another
    late.pool
    print(json.dumps({{"pool": True, "late": late.notes(), "started": _wait.started()}}))
    """
    facts = pool_or_skip(python(code.format(policy="passive")))
    assert facts["started"] == "passive"
    assert len(facts["late"]) == 1 and "already started with 'passive'" in facts["late"][0]


def test_unknown_wait_policy_is_refused():
    with pytest.raises(ValueError, match="cpu_wait_policy 'yield'.*auto, passive, short, spin"):
        affinity.wait_options("yield")


def test_run_and_benchmark_cli_flags_reach_the_pool(tmp_path):
    work = workdir(tmp_path)
    assert cli("convert", "--config", "deploy.yml", cwd=work).returncode == 0
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    r = cli("run", "--config", "deploy.yml", "--cpu_wait_policy", "spin", "--omp_num_threads", "2",
            cwd=work, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = gomp_settings(r.stderr)
    if not seen:
        pytest.skip("the digits model started no compute pool here (no libgomp report)")
    assert seen["OMP_WAIT_POLICY"] == "ACTIVE"
    r = cli("benchmark", "--config", "deploy.yml", "--cpu_wait_policy", "short", "--round", "1",
            "--omp_num_threads", "2", cwd=work, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert gomp_settings(r.stderr)["GOMP_SPINCOUNT"] == "2000"
    bad = cli("run", "--config", "deploy.yml", "--cpu_wait_policy", "yield", cwd=work, env=env)
    assert bad.returncode != 0 and "invalid choice: 'yield'" in bad.stderr and "Traceback" not in bad.stderr


# ---------------------------------------------------------------- affinity
PIN = """
    import json, os
    import numpy as np   # as the CLI does: OpenBLAS's threads exist before pinning
    from mace.runtime import affinity
    cpus = sorted(os.sched_getaffinity(0))
    fake = {fake}
    if fake:   # a big.LITTLE host: the first usable core little, the others big
        affinity._max_freq = lambda c: 1000 if c == cpus[0] else 2000
    cores = affinity.pin_threads({policy}, {threads})
    from mace.ops.fast import _pool
    pool = _pool.process_pool()
    if pool is not None:   # threads the pool starts after pinning inherit the main thread's cores
        pool.gemms([[(np.ones((64, 8), np.float32), np.ones((8, 32), np.float32),
                      np.zeros((64, 32), np.float32), 0.0, False)]], parts=2)()
    tasks = [int(t) for t in os.listdir("/proc/self/task")]
    sets = sorted({{tuple(sorted(os.sched_getaffinity(t))) for t in tasks}})
    print(json.dumps({{"cpus": cpus, "cores": cores, "sets": sets, "threads": len(tasks)}}))
"""


def pinned(policy: int, threads: int = -1, fake: bool = False) -> dict:
    r = python(PIN.format(policy=policy, threads=threads, fake=fake))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_policy_0_leaves_threads_alone():
    facts = pinned(0)
    assert facts["cores"] == [] and facts["sets"] == [facts["cpus"]]


@pytest.mark.parametrize("policy", [1, 2, 3, 4])
def test_big_and_little_policies_pin_every_thread(policy):
    facts = pinned(policy, fake=True)
    cpus = facts["cpus"]
    if len(cpus) < 2:
        pytest.skip("one usable core: nothing to choose between")
    want = cpus[1:] if policy in (1, 3) else cpus[:1]
    assert facts["cores"] == want
    assert facts["sets"] == [want], "every thread of the process (BLAS, compute pool) on the chosen cores"
    assert facts["threads"] > 1


def test_without_big_little_big_cores_are_all_cores_capped_by_threads():
    if len({affinity._max_freq(c) for c in os.sched_getaffinity(0)}) > 1:
        pytest.skip("this host has cores of different speeds")
    facts = pinned(1)   # this host: every core alike (or no cpufreq): 'big' is every core
    cpus = facts["cpus"]
    assert facts["cores"] == cpus and facts["sets"] == [cpus]
    facts = pinned(1, threads=1)   # MACE: no more big cores than threads
    assert facts["cores"] == cpus[:1] and facts["sets"] == [cpus[:1]]


def test_policy_cores_refuses_an_unknown_policy():
    with pytest.raises(ValueError, match="cpu_affinity_policy 9"):
        affinity.policy_cores(9, cpus=[0, 1])


def test_the_cli_path_without_the_flag_keeps_a_users_environment():
    # run/benchmark open engines with wait_options(flag value); None must not replace GOMP_SPINCOUNT
    r = python(START_POOL.format(policy=None), {"OMP_DISPLAY_ENV": "VERBOSE", "GOMP_SPINCOUNT": "12345"})
    facts = pool_or_skip(r)
    assert facts["started"] == "environment" and gomp_settings(r.stderr)["GOMP_SPINCOUNT"] == "12345"


def test_boards_get_the_wait_policy_flag():
    from mace.devices.runner import parse_args

    assert parse_args(["--model", "m.pb", "--cpu_wait_policy=short"]).cpu_wait_policy == "short"
    assert parse_args(["--model", "m.pb"]).cpu_wait_policy == ""   # none asked: the user's environment stands
