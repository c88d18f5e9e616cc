"""The fast LayerNorm (mace/ops/fast/layer_norm.py, loop _act_loops.layer_norm) against the
reference kernel and a float64 truth, over edge cases: constant rows (variance 0), large
offsets (the mean's cancellation), NaN and inf, one channel, scale / bias shapes, no bias, the
fused residual input (`skip`), and the pool's split."""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mace.ops.fast import _jit, _pool
from mace.runtime.engine import Engine
from tests.ops.ir_graph import graph_of

pytestmark = pytest.mark.skipif(_jit.act_loops() is None, reason="numba is not installed")


@pytest.fixture(params=["pool", "serial"])
def threads(request, monkeypatch):
    if request.param == "pool":
        if _pool.process_pool() is None:
            pytest.skip("no compute pool here")
        monkeypatch.setattr(_pool, "MIN_PARALLEL_WORK", 0)
        limit = threadpool_limits(2)
        request.addfinalizer(limit.restore_original_limits)
    else:
        monkeypatch.setenv("MACE_NO_POOL", "1")
    return request.param


def engines(x, scale, bias, skip=None, eps=1e-5):
    consts = {"scale": scale} | ({"bias": bias} if bias is not None else {})
    inputs = {"x": x.shape} | ({"r": skip.shape} if skip is not None else {})
    names = ["x", "scale"] + (["bias"] if bias is not None else []) + (["r"] if skip is not None else [])
    args = {"axis": -1, "epsilon": eps} | ({"skip": 1} if skip is not None else {})
    graph = graph_of(inputs, [("LayerNorm", names, ["y"], args)], consts)
    return Engine(graph), Engine(graph, options={"reference_kernels": True})


def truth(x, scale, bias, skip=None, eps=1e-5):
    v = (x + skip if skip is not None else x).astype(np.float64)
    mean = v.mean(-1, keepdims=True)
    y = (v - mean) / np.sqrt(((v - mean) ** 2).mean(-1, keepdims=True) + eps) * scale.astype(np.float64)
    return y + (0 if bias is None else bias.astype(np.float64))


def rows(c):
    rng = np.random.default_rng(c)
    x = rng.standard_normal((9, c)).astype(np.float32)
    x[1] = 3.0                      # a constant row: variance 0, output = bias
    x[2] += 1e4                     # a large offset: the mean cancels
    x[3] *= 1e-20                   # tiny values against eps
    return x


@pytest.mark.parametrize("c", [1, 7, 16, 384])
@pytest.mark.parametrize("shapes", [((-1,), (-1,)), ((1, 1, -1), (1, -1)), ((-1,), None), ((1,), (1,))])
def test_matches_reference_and_truth(c, shapes, threads):
    rng = np.random.default_rng(1)
    x = rows(c).reshape(3, 3, c)
    scale_shape, bias_shape = ([c if d == -1 else d for d in s] if s else None for s in shapes)
    scale = rng.uniform(0.5, 2, scale_shape).astype(np.float32)
    bias = rng.standard_normal(bias_shape).astype(np.float32) if bias_shape else None
    fast, ref = engines(x, scale, bias)
    assert fast.nodes[0].tag == "cpu:fast"
    got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    exact = truth(x, scale, bias)
    scale_of = np.abs(exact).max(-1, keepdims=True) + 1e-6
    assert (np.abs(got - exact) <= 2e-6 * scale_of).all()    # a few ulp of the row's largest value
    assert (np.abs(want - exact) <= 5e-4 * scale_of).all()   # the reference's float32 steps: looser
    np.testing.assert_allclose(got, want, rtol=0, atol=float(5e-4 * scale_of.max()))


def test_nan_and_inf_rows_stay_nan():
    x = rows(16).reshape(1, 9, 16)
    x[0, 4, 3], x[0, 5, 0] = np.nan, np.inf
    scale, bias = np.ones(16, np.float32), np.zeros(16, np.float32)
    fast, ref = engines(x, scale, bias)
    with np.errstate(all="ignore"):
        got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    assert np.isnan(got[0, 4]).all() and np.isnan(want[0, 4]).all()
    assert np.isnan(got[0, 5]).all() == np.isnan(want[0, 5]).all()
    np.testing.assert_allclose(got[0, 6:], want[0, 6:], atol=1e-5)


def test_the_skip_input_is_added_first(threads):
    rng = np.random.default_rng(3)
    x, r = rows(384).reshape(1, 9, 384), rng.standard_normal((1, 9, 384)).astype(np.float32)
    scale, bias = rng.uniform(0.5, 2, 384).astype(np.float32), rng.standard_normal(384).astype(np.float32)
    fast, ref = engines(x, scale, bias, skip=r)
    assert fast.nodes[0].tag == "cpu:fast"
    got, want = fast.run({"x": x, "r": r})["y"], ref.run({"x": x, "r": r})["y"]
    exact = truth(x + r, scale, bias)   # the sum rounded to float32, as an Add before it would
    scale_of = np.abs(exact).max(-1, keepdims=True)
    assert (np.abs(got - exact) <= 2e-6 * scale_of).all()
    assert (np.abs(want - exact) <= 5e-4 * scale_of).all()


def test_other_axes_and_extra_outputs_keep_the_reference():
    x = rows(8).reshape(1, 9, 8)
    graph = graph_of({"x": x.shape}, [("LayerNorm", ["x", "s"], ["y"], {"axis": 1})], {"s": np.ones((9, 8), np.float32)})
    assert Engine(graph).nodes[0].tag == "cpu"
    graph = graph_of({"x": x.shape}, [("LayerNorm", ["x", "s"], ["y", "m", "v"], {"axis": -1})],
                     {"s": np.ones(8, np.float32)}, outputs=["y", "m", "v"])
    assert Engine(graph).nodes[0].tag == "cpu"
