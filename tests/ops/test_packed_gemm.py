"""Our packed GEMM (mace/ops/fast/_loops.py `pgemm`, _conv_gemm.Panels) against numpy, and
which convs take it: on the pool, on one thread, and not where OpenBLAS keeps its threads."""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mace.ops.fast import _jit, _pool
from mace.ops.fast._conv_gemm import Panels
from mace.ops.fast.compute import ComputeContext

from tests.ops.test_fast_kernels import close, conv_case, run_both

pytestmark = pytest.mark.skipif(_jit.loops() is None, reason="numba is not installed: no packed GEMM")

F32 = np.float32


def product(rng, m, k, n, bias=True):
    a = rng.standard_normal((m, k)).astype(F32)
    w = rng.standard_normal((k, n)).astype(F32)
    b = rng.standard_normal(n).astype(F32) if bias else None
    return a, w, b


def reference(a, w, b, lo, hi):
    return np.clip(a.astype(np.float64) @ w + (0 if b is None else b), lo, hi)


_LOOPS = _jit.loops()
_BLOCK, _MR = (_LOOPS.ROW_BLOCK, _LOOPS.MR) if _LOOPS is not None else (192, 8)


@pytest.mark.parametrize("m", [1, 5, 6, 7, 8, 9, 13, 49, 50,
                               _BLOCK + 2 * _MR - 1, _BLOCK + 2 * _MR, 2 * _BLOCK + 5])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 31, 32, 33, 70])
@pytest.mark.parametrize("k", [1, 2, 3, 64])
def test_every_ragged_edge_matches_numpy(m, n, k):
    """Rows not a multiple of the tile's (MR: 8 on AVX-512, 3 on AVX2) nor of the row
    block (a remainder under 2 MR joins its block, 2 MR make a block of their own),
    columns not of the 32-wide panel (a 16-wide half panel, a ragged one through the
    tile buffer), K down to one and odd (the k loop's unrolled-by-2 part and its rest)."""
    loops = _jit.loops()
    a, w, b = product(np.random.default_rng(m * 1000 + n * 10 + k), m, k, n)
    gemm = Panels(w, b, (F32(-np.inf), F32(np.inf)), 1)
    c = np.full((m, n), np.nan, F32)
    loops.pgemm(*gemm.args(a, c), 0, m)
    close(c, reference(a, w, b, -np.inf, np.inf), rtol=1e-5)


def test_panels_start_on_a_cache_line():
    """64-byte vector loads of a 16-byte-aligned panel straddle two cache lines: the tile
    ran 1.2-1.3x slower (not a correctness matter, but nothing else would notice)."""
    for n, k in ((10, 3), (64, 576), (1000, 7)):
        gemm = Panels(np.ones((k, n), F32), np.ones(n, F32), (F32(0), F32(6)), 1)
        assert gemm.panels.ctypes.data % 64 == 0 and gemm.bias.ctypes.data % 64 == 0


def test_row_ranges_and_panel_ranges_write_only_their_part():
    loops = _jit.loops()
    a, w, b = product(np.random.default_rng(1), 40, 20, 100)
    gemm = Panels(w, b, (F32(0), F32(3)), 1)
    want = reference(a, w, b, 0, 3)
    c = np.full((40, 100), -7, F32)
    loops.pgemm(*gemm.args(a, c), 11, 29)
    close(c[11:29], want[11:29], rtol=1e-5)
    assert (c[:11] == -7).all() and (c[29:] == -7).all()
    c[:] = -7
    loops.pgemm_panels(*gemm.args(a, c), 1, 3)   # columns 32:96
    close(c[:, 32:96], want[:, 32:96], rtol=1e-5)
    assert (c[:, :32] == -7).all() and (c[:, 96:] == -7).all()


def test_strided_rows_and_no_bias():
    """a and c as windows of wider arrays (row strides of their own), bias none: zeros."""
    loops = _jit.loops()
    rng = np.random.default_rng(2)
    big_a = rng.standard_normal((30, 50)).astype(F32)
    big_c = np.full((30, 90), -7, F32)
    a, c = big_a[:, 5:25], big_c[:, 10:50]
    _, w, _ = product(rng, 30, 20, 40)
    gemm = Panels(w, None, (F32(-1), F32(1)), 1)
    loops.pgemm(*gemm.args(a, c), 0, 30)
    close(c, reference(a, w, None, -1, 1), rtol=1e-5)
    assert (big_c[:, :10] == -7).all() and (big_c[:, 50:] == -7).all()


@pytest.mark.skipif(_pool.process_pool() is None, reason="no compute pool here (numba's OpenMP layer or OpenBLAS's cblas missing)")
@pytest.mark.parametrize("m,n", [(300, 40), (20, 300)])
def test_split_across_the_pool_by_rows_or_by_panels(m, n):
    """Tall products split by rows, short wide ones by panels: the same numbers."""
    a, w, b = product(np.random.default_rng(m), m, 24, n)
    two = ComputeContext(threads=2)   # the engine's context, as its kernels get it
    gemm = Panels(w, b, (F32(0), F32(np.inf)), 2, compute=two)
    c = np.empty((m, n), F32)
    made = two.pool.made
    step = gemm.step(a, c)
    assert two.pool.made == made + 1   # a split step, not the serial loop
    with two.session():
        step()
    close(c, reference(a, w, b, 0, np.inf), rtol=1e-5)


@pytest.mark.parametrize("m,n,rows", [(196, 256, True), (196, 392, True), (3136, 64, True), (49, 512, False),
                                      (49, 2048, False), (196, 1024, False), (40, 300, False), (63, 16, False)])
def test_the_packed_gemm_splits_by_rows_unless_a_is_short_against_w(m, n, rows):
    """Two threads split a packed product by rows (each on the pixels the ops around it split
    the same way) unless W is over twice as wide as a is tall (ResNet-50's 49 x 2048) or a has
    too few rows for two tiles' worth each."""
    panels = Panels.__new__(Panels)
    panels.parts = 2
    assert panels.by_rows(m, n, m) == rows
    panels.parts = 1
    assert panels.by_rows(m, n, m)


@pytest.mark.skipif(_pool.process_pool() is None, reason="no compute pool here (numba's OpenMP layer or OpenBLAS's cblas missing)")
@pytest.mark.parametrize("k,n,split", [(512, 128, False), (1024, 1280, True)])
def test_a_one_row_product_splits_only_for_a_large_weight(k, n, split):
    """One row (a squeeze-and-excitation block's 1 x 1 conv): latency-bound chains per panel,
    kept on one thread unless the weight is large enough that streaming it is the cost."""
    a, w, b = product(np.random.default_rng(k), 1, k, n)
    two = ComputeContext(threads=2)
    gemm = Panels(w, b, (F32(0), F32(np.inf)), 2, compute=two)
    c = np.empty((1, n), F32)
    made = two.pool.made
    step = gemm.step(a, c)
    assert (two.pool.made == made + 1) == split
    with two.session():
        step()
    close(c, reference(a, w, b, 0, np.inf), rtol=1e-5)


CONVS = [dict(k=(3, 3), act="RELU"), dict(k=(1, 1), pads=(0, 0, 0, 0), act="RELUX", bias=False),
         dict(k=(7, 7), s=(2, 2), pads=(3, 3, 3, 3), c=3, o=40), dict(k=(3, 3), s=(2, 1), pads=(0, 1, 2, 0)),
         dict(k=(1, 1), s=(2, 2), pads=(0, 0, 0, 0), n=2),
         dict(k=(1, 1), pads=(0, 0, 0, 0), group=4, c=24, o=140, act="RELUX"),   # og 35: ragged panels
         dict(k=(1, 1), s=(2, 2), pads=(0, 0, 0, 0), group=3, c=12, o=69, n=2)]


@pytest.mark.parametrize("case", CONVS)
def test_convs_on_one_thread_take_the_packed_gemm(case):
    """With OpenBLAS at one thread (so its GEMMs would be single-threaded anyway), no pool."""
    x, consts, args = conv_case(np.random.default_rng(5), **dict(dict(h=17, w=15, c=12, o=20), **case))
    with threadpool_limits(1):
        got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algorithm in ("im2col", "pointwise")
    assert kern.algo.fused_epilogue and kern.algo.gemm.parts == 1
    assert kern.packed is kern.algo.wmat
    close(got, want)


@pytest.mark.parametrize("case", CONVS)
def test_openblas_keeps_its_threads_without_the_pool(case, monkeypatch):
    """No pool, OpenBLAS on two threads: its GEMMs (not ours), and an epilogue pass."""
    monkeypatch.setenv("MACE_NO_POOL", "1")
    x, consts, args = conv_case(np.random.default_rng(6), **dict(dict(h=17, w=15, c=12, o=20), **case))
    with threadpool_limits(2):
        got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algorithm in ("im2col", "pointwise")
    assert not kern.algo.fused_epilogue and not hasattr(kern.algo, "gemm")
    close(got, want)


@pytest.mark.parametrize("case", [CONVS[0], CONVS[4], dict(k=(3, 3), pads=(0, 0, 0, 0))])
def test_an_input_that_is_not_contiguous_is_copied_first(case):
    """The packed conv reads its input by address: a strided view (no arena tensor is one,
    but a direct bind may pass it) goes through a copy step, same numbers."""
    from mace.runtime.engine import Engine
    from tests.ops.test_fast_kernels import one_op_graph
    x, consts, args = conv_case(np.random.default_rng(8), **dict(dict(h=11, w=9, c=12, o=20), **case))
    with threadpool_limits(1):
        got, want, kern = run_both("Conv2D", x, consts, args)
        assert kern.algo.fused_epilogue
        wide = np.zeros(x.shape[:3] + (2 * x.shape[3],), F32)
        wide[..., ::2] = x
        view = wide[..., ::2]
        assert not view.flags.c_contiguous
        engine = Engine(one_op_graph("Conv2D", x, consts, args))
        out = np.full(want.shape, np.nan, F32)
        engine.nodes[0].kernel.bind([view], [out], None)()
    close(out, want)


def test_a_grouped_1x1_keeps_one_packed_copy():
    """The groups' Panels are views of the one stacked filter the grouped step reads."""
    x, consts, args = conv_case(np.random.default_rng(9), h=17, w=15, **CONVS[5])
    with threadpool_limits(1):
        got, want, kern = run_both("Conv2D", x, consts, args)
    assert all(np.shares_memory(g.panels, kern.algo.wmat) for g in kern.algo.gemms)
    assert all(g.panels.ctypes.data % 64 == 0 for g in kern.algo.gemms)
    close(got, want)


STORE_KINDS = ["SIGMOID", "SWISH", "HARDSWISH", "LEAKYRELU", "HARDSIGMOID", "TANH", "ELU"]


@pytest.fixture(params=[1, 2], ids=["1-thread", "pool"])
def threads(request, monkeypatch):
    if request.param == 2:
        if _pool.process_pool() is None:
            pytest.skip("no compute pool here")
        monkeypatch.setattr(_pool, "MIN_PARALLEL_WORK", 0)   # split even these small cases
    limit = threadpool_limits(request.param)
    request.addfinalizer(limit.restore_original_limits)
    return request.param


@pytest.mark.parametrize("case", [CONVS[0], CONVS[3], CONVS[4], CONVS[5], CONVS[6],
                                  dict(k=(3, 3), h=5, w=300, o=70)])   # by panels on the pool
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_fused_activation_keeps_the_conv_on_the_packed_gemm(kind, case, threads):
    """Any activation with a compiled loop runs in the packed GEMM's store step (issue 33 item 2):
    a fused HARDSWISH had sent the conv to im2col + OpenBLAS + a numpy epilogue."""
    x, consts, args = conv_case(np.random.default_rng(10), **dict(dict(h=17, w=15, c=12, o=20),
                                                                  **dict(case, act=kind)))
    got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algorithm in ("im2col", "pointwise") and kern.algo.fused_epilogue
    close(got, want)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_fused_activation_runs_in_the_depthwise_loop_and_the_fc_gemm(kind, threads):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 13, 11, 24)).astype(F32)
    args = dict(strides=[2, 1], dilations=[1, 1], pads=[1, 1, 1, 1], group=24, activation=kind,
                max_limit=6.0, activation_coefficient=0.1)
    got, want, kern = run_both("DepthwiseConv2d", x, [rng.standard_normal((24, 1, 3, 3)).astype(F32),
                                                       rng.standard_normal(24).astype(F32)], args)
    assert kern.after is None   # no pass after the loop
    close(got, want)
    x2 = rng.standard_normal((40, 24)).astype(F32)
    got, want, kern = run_both("FullyConnected", x2, [rng.standard_normal((50, 24)).astype(F32),
                                                      rng.standard_normal(50).astype(F32)],
                               dict(activation=kind, max_limit=6.0, activation_coefficient=0.1))
    assert kern.packed is not None
    close(got, want)


@pytest.mark.parametrize("case", [CONVS[0], CONVS[3], CONVS[4], CONVS[6], dict(k=(3, 3), h=5, w=300, o=70),
                                  dict(k=(5, 5), h=9, w=9, c=2, o=3)])   # small: not the packed GEMM
def test_a_fused_prelu_reads_its_slope_per_output_channel(case, threads):
    """PRELU fused by fuse_activation: the slope is the conv's input 3, one per output channel
    (a group's channels offset into it), applied in the store step, or after the GEMM elsewhere."""
    x, consts, args = conv_case(np.random.default_rng(12), **dict(dict(h=17, w=15, c=12, o=20),
                                                                  **dict(case, act="PRELU")))
    consts.append(np.random.default_rng(13).uniform(-1, 1, consts[0].shape[0]).astype(F32))
    got, want, kern = run_both("Conv2D", x, consts, args)
    close(got, want)
    assert not np.array_equal(want, np.maximum(want, 0))   # negative values: the slope mattered
    rng = np.random.default_rng(14)
    xd = rng.standard_normal((1, 11, 9, 24)).astype(F32)
    dargs = dict(strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], group=24, activation="PRELU")
    got, want, kern = run_both("DepthwiseConv2d", xd, [rng.standard_normal((24, 1, 3, 3)).astype(F32),
                                                        rng.standard_normal(24).astype(F32),
                                                        rng.uniform(-1, 1, 24).astype(F32)], dargs)
    assert kern.after is None
    close(got, want)
