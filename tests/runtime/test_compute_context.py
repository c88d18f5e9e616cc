"""Issue 32: the engine owns its compute context (mace/ops/fast/compute.py): threads and wait
policy come from its options, are read once, and reach every kernel as `ctx.compute`."""
from __future__ import annotations

import numpy as np
import pytest

from mace.ops.fast import compute as compute_mod
from mace.ops.fast.compute import SERIAL, ComputeContext
from mace.runtime.engine import Engine
from tests.ops.test_fast_kernels import one_op_graph


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
    assert compute_mod.of(object()) is SERIAL and SERIAL.width() == 1
    assert SERIAL.session().__enter__() is None
