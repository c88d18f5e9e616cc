"""Issue 32: the engine owns its compute context (mace/ops/fast/compute.py): threads and wait
policy come from its options, are read once, and reach every kernel as `ctx.compute`."""
from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mace.ops.fast import compute as compute_mod
from mace.ops.fast.compute import SERIAL, ComputeContext
from mace.runtime.engine import Engine
from tests.ops.test_fast_kernels import conv_case, one_op_graph


def relu_graph():
    x = np.random.default_rng(0).standard_normal((1, 8, 8, 4)).astype(np.float32)
    return one_op_graph("Activation", x, [], {"activation": "RELU"}), x


def test_the_engine_makes_one_context_from_its_options_and_its_kernels_get_it():
    graph, x = relu_graph()
    engine = Engine(graph, options={"num_threads": 3, "cpu_wait_policy": "passive"})
    ctx = engine.compute
    assert (ctx.threads, ctx.wait_policy) == (3, "passive")
    assert all(node.kernel.ctx.compute is ctx for node in engine.nodes)
    given = ComputeContext(threads=1)
    assert Engine(graph, compute=given).nodes[0].kernel.ctx.compute is given


def test_mace_no_pool_is_read_when_the_context_is_made(monkeypatch):
    monkeypatch.setenv("MACE_NO_POOL", "1")
    off = ComputeContext.from_options()
    monkeypatch.delenv("MACE_NO_POOL")
    assert off.pool is None and off.width() == 1 and not off.active()
    assert ComputeContext.from_options(environ={"MACE_NO_POOL": "1"}).pool is None


def test_an_unknown_wait_policy_fails_when_the_context_is_made():
    with pytest.raises(ValueError, match="cpu_wait_policy 'sleepy'"):
        ComputeContext(wait_policy="sleepy")


def test_kernels_built_outside_an_engine_bind_serial():
    assert compute_mod.compute_of(object()) is SERIAL and SERIAL.width() == 1
    assert SERIAL.session().__enter__() is None


needs_pool = pytest.mark.skipif(ComputeContext().pool is None, reason=(
    "no compute pool here (numba's OpenMP layer or numpy's 64-bit OpenBLAS cblas missing)"))


def depthwise_graph():
    """A depthwise conv big enough to split (its loop touches > MIN_PARALLEL_WORK elements)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 40, 40, 48)).astype(np.float32)
    w = rng.standard_normal((48, 1, 3, 3)).astype(np.float32)
    args = dict(strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], activation="RELU")
    return one_op_graph("DepthwiseConv2d", x, [w, np.zeros(48, np.float32)], args), x


def grouped_conv_graph():
    """A grouped 1x1 conv: its groups' GEMMs side by side on the pool (a gemm table)."""
    x, consts, args = conv_case(np.random.default_rng(5), h=40, w=40, c=32, o=48, k=(1, 1),
                                pads=(0, 0, 0, 0), group=4, act="RELU")
    return one_op_graph("Conv2D", x, consts, args), x


@needs_pool
@pytest.mark.parametrize("make", [depthwise_graph, grouped_conv_graph], ids=["loop", "gemms"])
def test_two_engines_in_one_process_each_run_at_their_own_width(make, monkeypatch):
    """Engine(num_threads=1) and Engine(num_threads=2) run alternately: each binds and runs at its
    own width (whatever OpenBLAS's process-wide count says), both give the reference's outputs,
    and the session count is back at zero after each run."""
    import numba
    graph, x = make()
    pool = ComputeContext().pool
    monkeypatch.setattr(pool, "_contention", None)   # the `auto` policy would size runs to the load
    want = Engine(graph, options={"reference_kernels": True}).run({"x": x})["y"]
    one = Engine(graph, options={"num_threads": 1})
    two = Engine(graph, options={"num_threads": 2})
    assert (one.compute.width(), two.compute.width()) == (1, 2)
    assert not one.pooled and two.pooled   # one thread: the serial loop, no session
    seen = {}
    two.observers.append(lambda when, node, engine: seen.setdefault(when, numba.get_num_threads()))
    with threadpool_limits(1):   # the process-wide count no longer decides an engine's width
        runs = [(e, e.run({"x": x})["y"]) for e in (one, two, one, two)]
    assert seen == {"before": 2, "after": 2} and pool.depth == 0
    for engine, got in runs:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))
    assert runs[0][1].tobytes() == runs[2][1].tobytes() and runs[1][1].tobytes() == runs[3][1].tobytes()


WAIT_POLICY_RUN = """
import json, os
import numpy as np
from mace.util import omp_wait
from mace.runtime.engine import Engine
from tests.ops.test_fast_kernels import one_op_graph   # this test's module would start the pool
x = np.ones((1, 40, 40, 48), np.float32)
graph = one_op_graph("Activation", x, [], {"activation": "RELU"})
first = Engine(graph, options={"num_threads": 2, "cpu_wait_policy": "passive"})
first.run({"x": x})
second = Engine(graph, options={"cpu_wait_policy": "spin"})
print(json.dumps({"pool": first.compute.pool is not None, "started": omp_wait.started(),
                  "spincount": os.environ.get("GOMP_SPINCOUNT"), "first": first.compute.notes(),
                  "second": second.compute.notes()}))
"""


@needs_pool
def test_the_engines_wait_policy_reaches_libgomp_without_setting_it_elsewhere():
    """An engine's `cpu_wait_policy` option (what `--cpu_wait_policy` sets) starts the pool under
    that policy: no process-wide choice, no environment variable set by the caller. A later
    engine asking for another one is told the process keeps the first (libgomp reads it once)."""
    import json
    import os
    import subprocess
    import sys

    from tests.cli_helpers import ROOT
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    r = subprocess.run([sys.executable, "-c", WAIT_POLICY_RUN], cwd=ROOT, env=dict(env, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    assert facts["pool"] and facts["started"] == "passive" and facts["spincount"] == "0", facts
    assert facts["first"] == [] and "already started with 'passive'" in facts["second"][0], facts
