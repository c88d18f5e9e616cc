"""The "cpu:fast" kernels (mace/ops/fast) against the numpy reference kernels, on random shapes.

Every case builds a one-op IR graph and runs it twice: once with the engine's
default tags (the fast kernel must be the one chosen) and once with
reference_kernels. Shapes cover strides, dilations, groups, odd channel
counts, asymmetric pads, batch 2 and fused activations; the algorithm
switches (dense / im2col chunks / Winograd chunks) are forced by patching
their size limits.
"""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mace.ir.graph import Graph
from mace.ops.fast import _cblas, _conv_dense, _conv_direct, _conv_gemm, _conv_shifted, _winograd
from mace.ops.fast import conv2d as conv2d_fast
from mace.runtime.engine import Engine
from tests.ops.ir_graph import graph_of

RNG = np.random.default_rng(7)


@pytest.fixture(params=["numba", "numba-serial", "numpy"])
def jit(request, monkeypatch):
    """Run a test with the compiled loops (mace/ops/fast/_loops.py) split across the compute
    pool's two threads (mace/ops/fast/_pool.py), the same loops serial, and without them."""
    from mace.ops.fast import (_conv_direct, _conv_gemm, _conv_shifted, _jit, _pool, conv2d,
                               depthwise_conv2d, fully_connected, pooling, softmax, transpose)
    if request.param.startswith("numba") and _jit.loops() is None:
        pytest.skip("numba is not installed")
    if request.param == "numba":
        if _pool.process_pool() is None:
            pytest.skip("no compute pool here (numba's OpenMP layer or a 64-bit OpenBLAS cblas missing)")
        limit = threadpool_limits(2)   # the pool's width, even on a one-core machine
        request.addfinalizer(limit.restore_original_limits)
        monkeypatch.setattr(_pool, "MIN_PARALLEL_WORK", 0)   # split even these small cases
    if request.param != "numba":
        monkeypatch.setenv("MACE_NO_POOL", "1")
    if request.param == "numpy":
        for module in (_conv_direct, _conv_gemm, _conv_shifted, conv2d, depthwise_conv2d, fully_connected,
                       pooling, transpose):
            monkeypatch.setattr(module, "loops", lambda: None)
        monkeypatch.setattr(pooling, "op_loops", lambda name: None)   # global pooling's loop
        monkeypatch.setattr(transpose, "op_loops", lambda name: None)   # the general permuted copy
        from mace.ops.fast import _base   # fused activations' compiled loops (_act_loops.py)
        for module in (_base, softmax):
            monkeypatch.setattr(module, "act_loops", lambda: None)
    return request.param


def one_op_graph(op_type, x, consts, args) -> Graph:
    """y = op_type(x, *consts) with `args`, NHWC, as the converter would leave it."""
    names = [f"c{i}" for i in range(len(consts))]
    return graph_of({"x": x.shape}, [(op_type, ["x"] + names, ["y"], dict(data_format="NHWC", **args))],
                    {n: np.asarray(v) for n, v in zip(names, consts)})


def run_both(op_type, x, consts, args):
    graph = one_op_graph(op_type, x, consts, args)
    fast = Engine(graph)
    assert fast.nodes[0].tag == "cpu:fast", f"{op_type} {args}: fast kernel not chosen"
    ref = Engine(graph, options={"reference_kernels": True})
    assert ref.nodes[0].tag == "cpu"
    got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    again = fast.run({"x": x})["y"]   # scratch is reused: a second run must not differ
    np.testing.assert_array_equal(got, again)
    return got, want, fast.nodes[0].kernel


def close(got, want, rtol=2e-5):
    assert got.shape == want.shape
    scale = max(float(np.abs(want).max()), 1e-6)
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * scale)


def conv_case(rng, n=1, h=9, w=7, c=5, o=6, k=(3, 3), s=(1, 1), d=(1, 1), pads=(1, 1, 1, 1),
              group=1, act="", bias=True, winograd=0):
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    wt = rng.standard_normal((o, c // group) + tuple(k)).astype(np.float32)
    consts = [wt] + ([rng.standard_normal(o).astype(np.float32)] if bias else [])
    args = dict(strides=list(s), dilations=list(d), pads=list(pads), group=group)
    if act:
        args.update(activation=act, max_limit=6.0, activation_coefficient=0.1)
    if winograd:
        args["winograd"] = winograd
    return x, consts, args


def random_conv(rng):
    group = int(rng.choice([1, 1, 1, 2, 3]))
    k = (int(rng.choice([1, 2, 3, 5])), int(rng.choice([1, 3, 4])))
    d = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    span = [(k[i] - 1) * d[i] + 1 for i in range(2)]   # the map must hold one window
    return dict(n=int(rng.choice([1, 2])), h=span[0] + int(rng.integers(0, 10)),
                w=span[1] + int(rng.integers(0, 10)),
                c=group * int(rng.integers(1, 6)), o=group * int(rng.integers(1, 5)), k=k,
                s=(int(rng.integers(1, 4)), int(rng.integers(1, 3))), d=d,
                pads=tuple(int(v) for v in rng.integers(0, 3, 4)), group=group,
                act=str(rng.choice(["", "RELU", "RELUX", "LEAKYRELU", "SIGMOID"])),
                bias=bool(rng.integers(0, 2)))


CONV_CASES = [random_conv(np.random.default_rng(i)) for i in range(40)] + [
    dict(k=(1, 1), pads=(0, 0, 0, 0)), dict(k=(1, 1), pads=(0, 0, 0, 0), s=(2, 2), n=2),
    dict(k=(1, 1), pads=(0, 0, 0, 0), group=3, c=6, o=9), dict(k=(7, 7), s=(2, 2), pads=(3, 3, 3, 3), h=17, w=15, c=3),
    dict(k=(3, 3), s=(2, 2), pads=(0, 0, 0, 0), c=3, h=15, w=15), dict(k=(3, 3), d=(2, 2), pads=(2, 2, 2, 2)),
]


@pytest.fixture(params=["auto", "im2col", "shifted"])
def mode(request, monkeypatch):
    if request.param != "auto":   # no direct / dense shortcut
        monkeypatch.setattr(_conv_direct, "DIRECT_MAX_MACS", 0)
        monkeypatch.setattr(_conv_dense, "DENSE_MAX_ELEMENTS", 0)
    if request.param == "im2col":   # many small im2col chunks, no shifted GEMMs
        monkeypatch.setattr(_conv_gemm, "CHUNK_BYTES", 256)
        monkeypatch.setattr(_conv_gemm, "MIN_CHUNK_FILTERS", 0)
        monkeypatch.setattr(_conv_shifted, "MIN_PIXELS", 1 << 40)
    if request.param == "shifted":   # shifted GEMMs wherever they apply, however small
        if _cblas.sgemm() is None:
            pytest.skip("numpy's BLAS is not an OpenBLAS whose cblas_sgemm mace can call")
        monkeypatch.setattr(_conv_shifted, "MIN_PIXELS", 0)
        monkeypatch.setattr(_conv_shifted, "MIN_CHANNELS", 0)
        monkeypatch.setattr(conv2d_fast, "PREFER_PACKED_IM2COL", False)
    return request.param


def shifted_applies(case) -> bool:
    return (tuple(case.get("s", (1, 1))) == (1, 1) and case.get("group", 1) == 1
            and tuple(case.get("k", (3, 3))) != (1, 1))


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_conv2d_matches_reference(case, mode, jit):
    x, consts, args = conv_case(np.random.default_rng(len(str(case))), **case)
    got, want, kern = run_both("Conv2D", x, consts, args)
    close(got, want)
    if mode == "im2col":
        assert kern.algorithm in ("im2col", "pointwise")
    if mode == "shifted" and shifted_applies(case):
        assert kern.algorithm == "shifted"


def test_shifted_is_chosen_for_large_stride1_maps(monkeypatch):
    """Off the compute pool a VGG-like 3x3 layer takes the shifted GEMMs (cblas there), a
    7x7 map does not; on the pool (test_compute_pool) the fused im2col wins instead."""
    if _cblas.sgemm() is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS whose cblas_sgemm mace can call")
    monkeypatch.setenv("MACE_NO_POOL", "1")
    x, consts, args = conv_case(np.random.default_rng(3), h=30, w=24, c=64, o=16, act="RELU")
    got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algorithm == "shifted"
    close(got, want)
    x, consts, args = conv_case(np.random.default_rng(3), h=7, w=7, c=64, o=16)
    assert run_both("Conv2D", x, consts, args)[2].algorithm != "shifted"


@pytest.mark.parametrize("k,s,n", [((1, 1), (1, 1), 1), ((1, 1), (2, 2), 1), ((3, 3), (1, 1), 2), ((3, 3), (2, 2), 1)])
def test_small_maps_run_their_gemm_transposed(k, s, n, monkeypatch):
    """7x7-stage GEMMs (<= SMALL_M rows) compute out^T = W^T @ A^T, then copy: same numbers
    (for OpenBLAS's threading: off the compute pool, which splits such GEMMs by columns)."""
    if _cblas.sgemm() is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS whose cblas_sgemm mace can call")
    monkeypatch.setenv("MACE_NO_POOL", "1")
    monkeypatch.setattr(_conv_direct, "DIRECT_MAX_MACS", 0)
    monkeypatch.setattr(_conv_dense, "DENSE_MAX_ELEMENTS", 0)
    pads = (0, 0, 0, 0) if k == (1, 1) else (1, 1, 1, 1)
    x, consts, args = conv_case(np.random.default_rng(4), n=n, h=7, w=7, c=40, o=24, k=k, s=s, pads=pads,
                                act="RELU")
    got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algo.transposed is not None, kern.algorithm
    close(got, want)


def test_cblas_operands_are_strided_views():
    """beta=1 accumulates, and row windows / column slices are used in place (ld* = row stride)."""
    gemm = _cblas.sgemm()
    if gemm is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS whose cblas_sgemm mace can call")
    rng = np.random.default_rng(0)
    big = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((30, 12)).astype(np.float32)[:7, 2:9]
    c = rng.standard_normal((10, 16)).astype(np.float32)
    want = c.copy()
    want[1:9, 3:10] += big[5:13, 4:11] @ b
    gemm.call(big[5:13, 4:11], b, c[1:9, 3:10], beta=1.0)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="not a BLAS operand"):
        gemm.call(big[:, ::2], np.ones((15, 7), np.float32), np.zeros((20, 7), np.float32))
    with pytest.raises(ValueError, match="sgemm shapes"):
        gemm.call(big, b, c)


def test_no_cblas_env_turns_it_off(monkeypatch):
    monkeypatch.setenv("MACE_NO_CBLAS", "1")
    _cblas.sgemm.cache_clear()
    try:
        assert _cblas.sgemm() is None
        x, consts, args = conv_case(np.random.default_rng(3), h=30, w=24, c=32, o=16)
        got, want, kern = run_both("Conv2D", x, consts, args)
        assert kern.algorithm == "im2col"
        close(got, want)
    finally:
        monkeypatch.delenv("MACE_NO_CBLAS")
        _cblas.sgemm.cache_clear()


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("case", [dict(h=8, w=8), dict(h=9, w=13, n=2, pads=(1, 0, 2, 1)),
                                  dict(h=14, w=14, c=16, o=8, act="RELU"), dict(h=3, w=5, bias=False),
                                  dict(h=11, w=6, c=7, o=3, pads=(0, 0, 0, 0))])
@pytest.mark.parametrize("chunk", ["whole", "chunked"])
def test_winograd_matches_reference(case, m, chunk, monkeypatch, jit):
    monkeypatch.setattr(_conv_direct, "DIRECT_MAX_MACS", 0)
    monkeypatch.setattr(_conv_dense, "DENSE_MAX_ELEMENTS", 0)
    for limit in ("MIN_TILES", "MIN_TILES_FEW_CHANNELS", "MIN_CHANNELS"):
        monkeypatch.setattr(_winograd, limit, 1)
    if chunk == "chunked":
        monkeypatch.setattr(_winograd, "CHUNK_BYTES", 1)   # one tile row per chunk
    x, consts, args = conv_case(np.random.default_rng(m), winograd=m, **case)
    got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algorithm == "winograd" and kern.algo.m == m
    close(got, want, rtol=2e-4 if m == 4 else 2e-5)   # F(4x4) rounds a little more


def test_winograd_is_ignored_where_it_does_not_apply(monkeypatch):
    monkeypatch.setattr(_conv_direct, "DIRECT_MAX_MACS", 0)
    monkeypatch.setattr(_conv_dense, "DENSE_MAX_ELEMENTS", 0)
    x, consts, args = conv_case(RNG, s=(2, 2), winograd=4)
    got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algorithm == "im2col"
    close(got, want)


def test_dense_path_for_tiny_maps(monkeypatch):
    monkeypatch.setattr(_conv_direct, "DIRECT_MAX_MACS", 0)
    x, consts, args = conv_case(RNG, h=8, w=8, c=1, o=8, act="RELU")
    got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algorithm == "dense"
    close(got, want)


@pytest.mark.parametrize("case", [dict(h=8, w=8, c=1, o=8, act="RELU"), dict(h=8, w=8, c=8, o=16, s=(2, 2)),
                                  dict(n=2, h=5, w=7, k=(3, 2), d=(1, 2), pads=(2, 0, 1, 1), act="RELUX"),
                                  dict(h=6, w=6, bias=False, pads=(0, 0, 0, 0))])
def test_direct_path_for_tiny_convs(case, jit):
    x, consts, args = conv_case(np.random.default_rng(5), **case)
    got, want, kern = run_both("Conv2D", x, consts, args)
    assert (kern.algorithm == "direct") == (jit != "numpy")
    close(got, want)


@pytest.mark.parametrize("case, loop", [
    (dict(h=5, w=1, c=40, o=30, k=(5, 1), pads=(0, 0, 0, 0), act="RELU"), "pixel"),   # whole window
    (dict(n=3, h=3, w=2, c=7, o=5, k=(3, 2), pads=(0, 0, 0, 0)), "rows"),   # under 16 filters
    (dict(h=1, w=1, c=60, o=60, k=(1, 1), pads=(0, 0, 0, 0)), "pixel"),     # 1x1 on one pixel
    (dict(n=2, h=1, w=3, c=20, o=130, k=(1, 1), pads=(0, 0, 0, 0), act="RELUX"), "pixel"),   # 128 + 16
    (dict(h=2, w=2, c=9, o=33, k=(1, 1), pads=(0, 0, 0, 0), bias=False), "pixel"),   # 32 + 16
    (dict(h=1, w=1, c=61, o=64, k=(1, 1), pads=(0, 0, 0, 0), act="RELU"), "pixel"),  # odd window: tail
    (dict(h=4, w=4, c=8, o=16, k=(1, 1), pads=(0, 0, 0, 0), s=(2, 2)), "direct"),    # strided
    (dict(h=5, w=1, c=40, o=30, k=(5, 1), pads=(1, 0, 1, 0)), "direct")])            # padded
def test_direct_conv_as_a_product_of_rows(case, loop, jit):
    """A conv whose one output pixel's window is the whole unpadded input (a streaming model's
    conv over its frames), or a 1x1 conv without stride or pads: from 16 filters the register
    tile of _pixel_loops (every block width: 128, 64, 32, 16 filters; a window of odd length),
    with fewer and a long window the FC loop over the flattened image; others conv_direct."""
    x, consts, args = conv_case(np.random.default_rng(9), **case)
    got, want, kern = run_both("Conv2D", x, consts, args)
    close(got, want)
    if jit != "numpy":
        algo = kern.algo
        assert kern.algorithm == "direct"
        assert loop == ("pixel" if algo.wide is not None else "rows" if algo.rows is not None else "direct")


@pytest.mark.parametrize("case", [dict(c=8, h=10, w=10), dict(c=70, h=9, w=11, s=(2, 2), n=2),
                                  dict(c=64, h=8, w=8, k=(5, 5), pads=(2, 2, 2, 2), act="RELUX"),
                                  dict(c=5, h=7, w=9, d=(2, 2), pads=(2, 1, 2, 1), act="RELU"),
                                  dict(c=96, h=6, w=6, pads=(0, 0, 0, 0), bias=False),
                                  dict(c=3, h=6, w=6, k=(3, 1), pads=(1, 0, 1, 0), s=(1, 2)),
                                  dict(c=32, h=12, w=12, s=(2, 2), pads=(0, 1, 1, 0), act="RELUX"),
                                  dict(c=17, h=13, w=11, s=(2, 1), d=(1, 2), pads=(1, 2, 1, 2)),
                                  dict(c=16, h=5, w=4, pads=(2, 2, 2, 2)),
                                  # 5x5 interiors (one expression a channel): strided, dilated, uneven pads
                                  dict(c=24, h=13, w=15, k=(5, 5), s=(2, 2), pads=(1, 2, 2, 1), act="RELUX"),
                                  dict(c=9, h=14, w=12, k=(5, 5), d=(2, 2), pads=(4, 3, 4, 3), act="RELU"),
                                  dict(c=40, h=11, w=9, k=(5, 5), s=(1, 2), pads=(0, 2, 1, 2))])
def test_depthwise_matches_reference(case, jit):
    case = dict(case)   # shared between the jit params
    c = case.pop("c")
    x, consts, args = conv_case(np.random.default_rng(c), c=c, o=c, **case)
    consts[0] = consts[0][:, :1]          # [C, 1, kh, kw]
    args.pop("group")
    got, want, _ = run_both("DepthwiseConv2d", x, consts, args)
    close(got, want)


POOL_CASES = [
    dict(k=[3, 3], s=[2, 2], p=[0, 0, 0, 0]), dict(k=[3, 3], s=[1, 1], p=[1, 1, 1, 1]),
    dict(k=[2, 2], s=[2, 2], p=[0, 0, 0, 0], n=2), dict(k=[3, 3], s=[2, 2], p=[0, 0, 0, 0], ceil=1, h=14, w=13),
    dict(k=[3, 2], s=[2, 1], p=[1, 0, 1, 1], ceil=1), dict(k=[5, 5], s=[3, 3], p=[2, 2, 2, 2], include=1),
    dict(k=[9, 7], s=[1, 1], p=[0, 0, 0, 0], h=9, w=7), dict(k=[1, 1], s=[2, 2], p=[0, 0, 0, 0]),
    dict(k=[3, 3], s=[2, 2], p=[1, 1, 1, 1], d=[2, 2], h=15, w=15),
]


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pooling_matches_reference(case, kind, jit):
    n, h, w = case.get("n", 1), case.get("h", 12), case.get("w", 11)
    x = np.random.default_rng(h * w).standard_normal((n, h, w, 7)).astype(np.float32)
    args = dict(pooling_type=kind, kernels=case["k"], strides=case["s"], pads=case["p"],
                dilations=case.get("d", [1, 1]), ceil_mode=case.get("ceil", 0),
                count_include_pad=case.get("include", 0))
    got, want, _ = run_both("Pooling", x, [], args)
    close(got, want)


def _compiled_loops(step) -> set:
    """Names of the compiled loops a bound step calls: a partial's function, or a pool split's
    driver and serial loop (Pool.rows: _pool.Split)."""
    found = [getattr(step, a, None) for a in ("func", "par", "serial")]
    return {f.py_func.__name__ for f in found if hasattr(f, "py_func")}


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("n,h,w,c", [(1, 9, 7, 7), (1, 5, 4, 16), (2, 6, 5, 60), (1, 3, 3, 64),
                                     (2, 4, 7, 70), (1, 33, 31, 130), (1, 1, 1, 20)])
def test_global_pooling_matches_reference(n, h, w, c, kind, jit):
    """A global pool (window = the map, no pads): with 16 channels or more the compiled loop
    (_line_loops.global_pool: channels in registers, 64 a row, split over images and blocks),
    the reference's bytes, NaN / inf / -0.0 included; fewer channels or no numba: numpy's."""
    x = np.random.default_rng(c).standard_normal((n, h, w, c)).astype(np.float32)
    x[0, 0, 0, 0], x[0, h - 1, w - 1, 1], x[n - 1, 0, w - 1, c - 1] = np.nan, np.inf, -np.inf
    x[..., 2] = -0.0
    args = dict(pooling_type=kind, kernels=[h, w], strides=[1, 1], pads=[0, 0, 0, 0])
    graph = one_op_graph("Pooling", x, [], args)
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    looped = bool(_compiled_loops(fast._steps[0]) & {"global_pool", "global_pool_par"})
    assert looped == (jit != "numpy" and c >= 16), fast._steps[0]
    if looped:
        assert got.tobytes() == want.tobytes()
    else:
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        close(np.nan_to_num(got, posinf=0, neginf=0), np.nan_to_num(want, posinf=0, neginf=0))


@pytest.mark.parametrize("beta", [0.75, 0.5, 1.0, 0.6])
@pytest.mark.parametrize("size,c", [(5, 16), (3, 7), (4, 1), (1, 3)])
def test_lrn_matches_reference(size, c, beta):
    x = np.random.default_rng(c).standard_normal((2, 5, 4, c)).astype(np.float32) * 3
    args = dict(size=size, alpha=0.3, beta=beta, bias=1.5)
    got, want, _ = run_both("LocalResponseNorm", x, [], args)
    close(got, want)


def test_scratch_is_one_region_sized_for_the_largest_kernel():
    x, consts, args = conv_case(RNG, h=20, w=20, c=8, o=8)
    graph = graph_of({"x": x.shape}, [("Conv2D", ["x", "w"], ["y1"], dict(data_format="NHWC", **args)),
                                      ("Conv2D", ["y1", "w"], ["y"],
                                       dict(data_format="NHWC", **{**args, "pads": [0, 0, 0, 0]}))],
                     {"w": consts[0]})
    engine = Engine(graph)
    sizes = [n.kernel.scratch_nbytes for n in engine.nodes]
    assert engine.scratch_bytes == max(sizes) > 0
    ref = Engine(graph, options={"reference_kernels": True})
    close(engine.run({"x": x})["y"], ref.run({"x": x})["y"])


@pytest.mark.parametrize("shape,dims", [((1, 5, 1, 3, 8), [0, 1, 2, 4, 3]), ((2, 3, 6, 7), [0, 2, 3, 1]),
                                        ((4, 2), [1, 0]), ((2, 3, 4), [2, 0, 1]),
                                        ((1, 4, 6, 5, 3), [0, 2, 1, 4, 3]),
                                        ((1, 20, 19, 37), [0, 3, 1, 2]), ((2, 5, 3, 33, 1), [0, 4, 2, 3, 1]),
                                        ((45, 12), [1, 0]), ((1, 1, 8, 8), [0, 2, 3, 1]),
                                        ((3, 1, 5), [1, 0, 2]), ((1, 3, 40, 41), [0, 2, 3, 1])])
def test_transpose_matches_reference(shape, dims, monkeypatch, jit):
    from mace.ops.fast import transpose
    monkeypatch.setattr(transpose, "MIN_ELEMENTS", 1)
    monkeypatch.setattr(transpose, "BLOCK_ROWS", 16)   # several blocks, the last one partial
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got, want, kern = run_both("Transpose", x, [], dict(dims=dims))
    np.testing.assert_array_equal(got, want)
    if dims == [0, 2, 3, 1] and shape[1] > 1:   # an NCHW image -> NHWC: the compiled loop
        assert (kern.narrow is not None) == (jit != "numpy")


@pytest.mark.parametrize("shape", [(1, 3, 32, 32), (2, 3, 5, 7), (1, 8, 4, 4)])
def test_a_small_nchw_image_to_nhwc_runs_the_compiled_loop(shape, jit):
    """A model's first Transpose of a small image (gender_v1's 3 x 32 x 32) is the compiled loop
    too, not numpy's permuted copy (there is no size below which one call loses)."""
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x.flat[:3] = [np.nan, -np.inf, -0.0]
    got, want, kern = run_both("Transpose", x, [], dict(dims=[0, 2, 3, 1]))
    assert got.tobytes() == want.tobytes()
    assert (kern.narrow is not None) == (jit != "numpy")


@pytest.mark.parametrize("shape,dims", [((256, 3, 20), [0, 2, 1]), ((1, 16, 16, 2, 12), [0, 1, 2, 4, 3])])
def test_many_small_images_are_not_a_call_each(shape, dims, jit):
    """The compiled NCHW -> NHWC loop runs one image a call: for many small ones (ShuffleNet's
    channel shuffle, [784, 2, 58]: 784 calls, 132 us) the few column copies are the step
    (30 us), with numpy's bytes."""
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    x.flat[:3] = [np.nan, -np.inf, -0.0]
    got, want, kern = run_both("Transpose", x, [], dict(dims=dims))
    assert got.tobytes() == want.tobytes()
    assert kern.narrow is None
    engine = Engine(one_op_graph("Transpose", x, [], dict(dims=dims)))
    assert len(engine._calls[0]) <= 3


@pytest.mark.parametrize("shape,dims,compiled", [
    ((1, 16, 12, 32), [0, 2, 1, 3], True),    # a BERT's attention heads out
    ((1, 16, 12, 32), [0, 2, 3, 1], True),    # its keys, transposed for Q K^T
    ((1, 12, 16, 32), [0, 2, 1, 3], True),    # heads back in
    ((1, 25, 19, 10), [0, 3, 1, 2], True),    # a detector head's NHWC -> NCHW
    ((2, 3, 4, 5, 6), [0, 1, 3, 2, 4], True),  # five axes, two merged: a 4-D permutation
    ((2, 3, 4, 5, 6), [4, 2, 0, 3, 1], False),  # five axes nothing merges: numpy's copy
    ((1, 31, 17, 2), [0, 2, 1, 3], True),     # innermost pairs moved as one int64
    ((5, 7), [1, 0], True)])
def test_a_general_transpose_is_one_compiled_copy(shape, dims, compiled, monkeypatch, jit):
    """Any permutation of 2-4 axes once unit axes drop and adjacent ones merge is the compiled
    permuted copy (_transpose_loops.permute4): numpy's bytes (NaN, inf, -0.0 moved as they
    are), one step a chain can take, split across the pool's threads by rows."""
    from mace.ops.fast import chain, transpose
    monkeypatch.setattr(transpose, "MIN_ELEMENTS", 1 << 30)   # not the small-axis copies
    monkeypatch.setattr(transpose, "SMALL_AXIS", 0)           # nor the narrow loop
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x.flat[:4] = [np.nan, -np.inf, -0.0, np.inf]
    got, want, kern = run_both("Transpose", x, [], dict(dims=dims))
    assert got.tobytes() == want.tobytes()
    graph = one_op_graph("Transpose", x, [], dict(dims=dims))
    engine = Engine(graph)
    (step,) = engine._calls[0]
    loop = getattr(step, "serial", None) or getattr(step, "func", None)
    uses = getattr(loop, "__name__", "") == "permute4"
    assert uses == (compiled and jit != "numpy"), step
    if uses and jit == "numba-serial":
        assert chain._entry(step) is not None


@pytest.mark.parametrize("shape,log", [((1, 10), 0), ((2, 3, 5, 7), 0), ((4, 1000), 1), ((3, 1), 0)])
def test_softmax_matches_reference(shape, log, jit):
    if jit == "numpy":
        pytest.skip("the fast Softmax is the compiled loop only")
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 10).astype(np.float32)
    got, want, _ = run_both("Softmax", x, [], dict(axis=-1, use_log=log))
    close(got, want, rtol=1e-5)


@pytest.mark.parametrize("log", [0, 1])
def test_softmax_edges_match_reference(log, jit):
    """Attention masks (-inf entries, a fully masked row: NaN), NaN and +inf rows (NaN), a NaN
    that is not the row's max, -0.0, huge and tiny values, one-element rows: NaN where the
    reference gives NaN, 0 where it gives 0, else within 2 float32 ulp of the reference or, where
    the reference's float32 sum and log are further off, of the float64 truth (both round
    x - max to float32 first, as the truth here does)."""
    if jit == "numpy":
        pytest.skip("the fast Softmax is the compiled loop only")
    inf, nan = np.inf, np.nan
    x = (np.random.default_rng(5).standard_normal((9, 37)) * 4).astype(np.float32)
    x[0, ::3] = -inf                 # masked entries
    x[1] = -inf                      # a fully masked row
    x[2, 5] = nan                    # NaN, not the max
    x[3, 7] = inf
    x[4] = -0.0
    x[4, 3] = 0.0
    x[5] *= 1e6                      # exp of huge differences underflows to 0
    x[6] = 3e38
    x[6, 1] = -3e38                  # x - max overflows to -inf
    x[7] *= 1e-30
    x[8, :] = np.float32(-1e-45)     # denormals
    got, want, _ = run_both("Softmax", x, [], dict(axis=-1, use_log=log))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got == 0, want == 0)
    ok = ~np.isnan(want)
    assert np.all(np.isinf(got[ok]) == np.isinf(want[ok]))
    with np.errstate(all="ignore"):
        d = (x - x.max(axis=-1, keepdims=True)).astype(np.float64)
        total = np.exp(d).sum(axis=-1, keepdims=True)
        truth = (d - np.log(total) if log else np.exp(d) / total).astype(np.float32)
    gi, wi, ti = (v[ok].view(np.int32).astype(np.int64) for v in (got, want, truth))
    assert np.minimum(np.abs(gi - wi), np.abs(gi - ti)).max(initial=0) <= 2
    one = np.array([[2.5], [-inf], [nan]], np.float32)   # k = 1: 1 (log: 0), NaN, NaN
    got, want, _ = run_both("Softmax", one, [], dict(axis=-1, use_log=log))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("act", ["", "RELU", "RELUX", "LEAKYRELU", "SIGMOID", "HARDSWISH"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("small", [True, False])
@pytest.mark.parametrize("rows", [3, 1])
def test_fully_connected_matches_reference(act, bias, small, rows, jit, monkeypatch):
    """A small weight is one compiled loop; so is one input row on the pool (weight rows
    split across its threads); else GEMM + epilogue. On one row a fused activation that is not
    a clip runs the Activation's compiled loop after the rows loop."""
    from mace.ops.fast import fully_connected
    if not small:   # the GEMM + epilogue path
        monkeypatch.setattr(fully_connected, "SMALL_WEIGHT", 0)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, 37)).astype(np.float32)
    consts = [rng.standard_normal((11, 37)).astype(np.float32)]
    consts += [rng.standard_normal(11).astype(np.float32)] if bias else []
    args = dict(activation=act, max_limit=1.5, activation_coefficient=0.1) if act else {}
    got, want, kern = run_both("FullyConnected", x, consts, args)
    close(got, want)
    looped = small or (rows == 1 and jit == "numba")
    clip = act in ("", "RELU", "RELUX")   # others: one row only (several: the packed GEMM's store)
    assert kern.small == (looped and jit != "numpy" and (clip or rows == 1))
    assert (kern.algorithm_name == "rows") == kern.small


def test_reshape_matches_reference():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    got, want, _ = run_both("Reshape", x, [], dict(dims=[2, -1]))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("hw,c,asked,used", [(56, 64, 4, 4), (14, 256, 4, 2), (14, 256, 2, 2), (7, 512, 4, 0),
                                             (13, 64, 4, 0), (55, 16, 4, 0), (28, 128, 4, 4)])
def test_winograd_block_follows_the_measured_limits(hw, c, asked, used):
    geo = _conv_gemm.ConvGeometry(1, hw, hw, c, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1), hw, hw, c, 1)
    assert _winograd.pick_block(geo, asked) == used



@pytest.mark.parametrize("kind", ["SUM", "SUB", "PROD", "MIN", "MAX"])
@pytest.mark.parametrize("act", ["", "RELU", "RELUX"])
def test_eltwise_pair_matches_reference(kind, act, jit):
    from mace.ops.fast._jit import loops
    if loops() is None:
        pytest.skip("the fast Eltwise is the compiled loop only")
    rng = np.random.default_rng(len(kind) + len(act))
    a = rng.standard_normal((1, 5, 7, 12)).astype(np.float32) * 4
    b = rng.standard_normal((1, 5, 7, 12)).astype(np.float32) * 4
    args = dict(type=kind)
    if act:
        args.update(activation=act, max_limit=6.0)
    graph = graph_of({"x": a.shape, "z": b.shape}, [("Eltwise", ["x", "z"], ["y"], args)])
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast" and ref.nodes[0].tag == "cpu"
    got, want = fast.run({"x": a, "z": b})["y"], ref.run({"x": a, "z": b})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    if act:
        assert got.min() >= 0 and (act != "RELUX" or got.max() <= 6.0)


@pytest.mark.parametrize("kind", ["SUM", "SUB", "PROD", "MIN", "MAX"])
@pytest.mark.parametrize("shape", [(), (1, 16, 24)])
@pytest.mark.parametrize("first", [False, True])
def test_a_pair_with_a_constant_of_its_shape_is_one_chainable_pass(kind, shape, first):
    """A tensor against a constant of its own shape (a dynamically quantized MatMul's scale
    product, scalar x scalar: 18 a MiniLM run; BERT's embeddings + a constant table) is the
    compiled pair loop over flat views, 0-d as one element: the reference's bytes (NaN, inf,
    signed zeros on both sides), and a step a chain can take (numpy's ufunc ended one)."""
    from mace.ops.fast import chain
    from mace.ops.fast._jit import loops
    if loops() is None:
        pytest.skip("the fast Eltwise pair is the compiled loop only")
    rng = np.random.default_rng(len(kind) + len(shape))
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    c = rng.uniform(-3, 3, shape).astype(np.float32)
    if x.size > 4:
        x.ravel()[:4], c.ravel()[:4] = [np.nan, np.inf, -0.0, 0.0], [1.0, -np.inf, 0.0, -0.0]
    names = ["c", "x"] if first else ["x", "c"]
    graph = graph_of({"x": shape}, [("Eltwise", names, ["y"], dict(type=kind))], {"c": c})
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast" and fast.nodes[0].kernel.path == "pair"
    with np.errstate(all="ignore"):
        got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    assert got.shape == want.shape == shape and got.tobytes() == want.tobytes()
    (step,) = fast._calls[0]   # as bound (the program after a run calls the machine code)
    assert chain._entry(step) is not None, "a compiled step of one-dimension arrays: chainable"


@pytest.mark.parametrize("act", ["", "RELU", "RELUX"])
@pytest.mark.parametrize("shape", [(1, 6, 5, 40), (2, 3, 3, 7), (4, 9)])
def test_batchnorm_matches_reference(act, shape, jit):
    from mace.ops.fast._jit import loops
    if loops() is None:
        pytest.skip("the fast BatchNorm is the compiled loop only")
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32) * 3
    c = shape[-1]
    consts = [rng.uniform(0.5, 1.5, c).astype(np.float32), rng.standard_normal(c).astype(np.float32)]
    args = dict(activation=act, max_limit=2.0) if act else {}
    got, want, _ = run_both("BatchNorm", x, consts, args)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, np.clip(x * consts[0] + consts[1], 0 if act else -np.inf,
                                            2.0 if act == "RELUX" else np.inf), rtol=1e-6, atol=1e-6)


# groups 2, 3, 4, 8 take the loop's inlined interleavings, the others its strided stores
@pytest.mark.parametrize("shape,group", [((1, 5, 7, 12), 3), ((2, 3, 3, 8), 4), ((1, 1, 1, 6), 2),
                                         ((3, 10), 5), ((1, 4, 4, 9), 9), ((1, 3, 5, 136), 4),
                                         ((2, 40), 8), ((1, 2, 2, 66), 2)])
def test_channel_shuffle_matches_reference(shape, group, jit):
    from mace.ops.fast._jit import loops
    if loops() is None:
        pytest.skip("the fast ChannelShuffle is the compiled loop only")
    x = np.random.default_rng(group).standard_normal(shape).astype(np.float32)
    got, want, _ = run_both("ChannelShuffle", x, [], dict(group=group))
    np.testing.assert_array_equal(got, want)
    c = shape[-1]   # hand numpy: ONNX's reshape (g, C/g) -> transpose -> flatten
    np.testing.assert_array_equal(got, x.reshape(-1, group, c // group).transpose(0, 2, 1).reshape(shape))


@pytest.mark.parametrize("shapes,axis", [([(1, 5, 7, 12), (1, 5, 7, 4)], 3), ([(2, 3, 3, 8), (2, 3, 3, 1), (2, 3, 3, 5)], -1),
                                         ([(1, 4, 6, 3), (1, 2, 6, 3)], 1), ([(2, 5), (3, 5)], 0),
                                         ([(1, 6, 6, 40), (1, 6, 6, 24)], 3)])
def test_concat_matches_reference(shapes, axis, jit):
    from mace.ops.fast._jit import loops
    if loops() is None:
        pytest.skip("the fast Concat is the compiled loop only")
    rng = np.random.default_rng(len(shapes) + axis)
    x = rng.standard_normal(shapes[0]).astype(np.float32)
    rest = [rng.standard_normal(s).astype(np.float32) for s in shapes[1:]]
    got, want, _ = run_both("Concat", x, rest, dict(axis=axis))   # later inputs as constants
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.concatenate([x] + rest, axis=axis))


@pytest.mark.parametrize("kind", ["MEAN", "SUM", "MAX", "MIN"])
@pytest.mark.parametrize("shape,keep", [((1, 7, 7, 40), 1), ((2, 3, 5, 9), 0), ((1, 1, 1, 6), 1)])
def test_global_reduce_matches_reference(kind, shape, keep, jit):
    from mace.ops.fast._jit import loops
    if loops() is None:
        pytest.skip("the fast Reduce is the compiled loop only")
    x = np.random.default_rng(len(kind)).standard_normal(shape).astype(np.float32)
    got, want, _ = run_both("Reduce", x, [], dict(reduce_type=kind, axis=[1, 2], keepdims=keep))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    fn = {"MEAN": np.mean, "SUM": np.sum, "MAX": np.max, "MIN": np.min}[kind]
    np.testing.assert_allclose(got, fn(x, axis=(1, 2), keepdims=bool(keep)), rtol=1e-5, atol=1e-6)


MATMUL_CASES = [((40, 24), (24, 30), 0, 0, "b"), ((3, 20, 16), (3, 16, 9), 0, 0, ""),
                ((3, 20, 16), (16, 9), 0, 0, "b"), ((20, 16), (3, 16, 9), 0, 0, "b"),
                ((3, 20, 16), (3, 9, 16), 0, 1, ""), ((70, 33), (40, 33), 0, 1, "b"),
                ((33, 70), (33, 40), 1, 0, "ab"), ((1, 64), (64, 50), 0, 0, "b")]


@pytest.mark.parametrize("sa,sb,ta,tb,consts", MATMUL_CASES)
def test_matmul_matches_reference(sa, sb, ta, tb, consts, jit):
    """2-D and batched products, shared operands, transposes (an input b read transposed,
    constant ones transposed at load), a one-row product (GEMV), against the reference."""
    rng = np.random.default_rng(len(sa) + len(sb) + ta + tb)
    values = {"x": rng.standard_normal(sa).astype(np.float32), "z": rng.standard_normal(sb).astype(np.float32)}
    const = {"x": "a" in consts, "z": "b" in consts}
    graph = graph_of({n: v.shape for n, v in values.items() if not const[n]},
                     [("MatMul", list(values), ["y"], dict(transpose_a=ta, transpose_b=tb))],
                     {n: v for n, v in values.items() if const[n]})
    feed = {n: values[n] for n in graph.input_names}
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast", "fast MatMul not chosen"
    got, want = fast.run(feed)["y"], ref.run(feed)["y"]
    close(got, want)
    ops = [np.swapaxes(values[n], -1, -2) if t else values[n] for n, t in (("x", ta), ("z", tb))]
    close(got, np.matmul(*ops))
    if jit == "numba":
        assert fast.pooled


@pytest.mark.parametrize("zero, lo, hi", [(131, 0, 255), (0, 0, 255), (-3, -128, 127)])
@pytest.mark.parametrize("shape", [(1, 6, 5, 40), (2, 9)])
def test_fake_quantize_matches_reference_bit_for_bit(zero, lo, hi, shape, jit):
    from mace.ops.fast._jit import loops
    if loops() is None:
        pytest.skip("the fast FakeQuantize is the compiled loop only")
    rng = np.random.default_rng(abs(zero) + len(shape))
    scale = np.float32(0.037)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.reshape(-1)[:4] = np.float32(scale * np.float32(2.5)), -1e6, 1e6, 0.0   # a tie, both clamps
    args = dict(scale=float(scale), zero_point=zero, quant_min=lo, quant_max=hi)
    graph = graph_of({"x": shape}, [("FakeQuantize", ["x"], ["y"], args)])
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast" and ref.nodes[0].tag == "cpu"
    got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    np.testing.assert_array_equal(got, want)
    steps = want / scale
    np.testing.assert_allclose(steps.reshape(-1)[1:3], [lo - zero, hi - zero], rtol=1e-6)


@pytest.mark.parametrize("shape, kernel, args, algorithm", [
    ((1, 4, 4, 3), (8, 3, 3, 3), {"padding_values": [1, 1, 1, 1]}, "direct"),
    ((1, 28, 28, 32), (32, 32, 1, 1), {}, "pointwise-packed"),
    ((1, 28, 28, 32), (32, 32, 3, 3), {"padding_values": [1, 1, 1, 1]}, "im2col-packed"),
    ((1, 40, 40, 64), (64, 64, 3, 3), {"padding_values": [1, 1, 1, 1], "winograd": 4}, "winograd-f4"),
])
def test_the_profiler_names_the_conv_algorithm(shape, kernel, args, algorithm):
    # issue 32: the profiler and benchmark's per-op table said `cpu:fast` for six algorithms
    from mace.ops.fast._jit import loops
    from mace.runtime.profiler import OpProfiler

    if loops() is None and algorithm != "winograd-f4":
        pytest.skip("numba is not installed here: the packed and direct loops are not built")
    rng = np.random.default_rng(0)
    w = rng.normal(size=kernel).astype(np.float32)
    x = rng.normal(size=shape).astype(np.float32)
    engine = Engine(one_op_graph("Conv2D", x, [w], {"strides": [1, 1], **args}))
    profiler = OpProfiler()
    engine.observers.append(profiler)
    engine.run({"x": x})
    assert [s.kernel for s in profiler.stats()] == [f"cpu:fast/{algorithm}"]


@pytest.mark.parametrize("act", ["", "RELU"])
@pytest.mark.parametrize("rows", [2, 16, 129])
def test_fully_connected_on_the_packed_gemm(act, rows, jit):
    """Several rows (a transformer's tokens) run our packed GEMM, the weight packed at load
    (issue 33 item 4): OpenBLAS re-packed it on every call."""
    from mace.ops.fast.compute import ComputeContext
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 96)).astype(np.float32)
    consts = [rng.standard_normal((200, 96)).astype(np.float32), rng.standard_normal(200).astype(np.float32)]
    got, want, kern = run_both("FullyConnected", x, consts, dict(activation=act) if act else {})
    close(got, want)
    expect = "packed" if jit != "numpy" and ComputeContext.from_options().gemm_width() > 0 else "blas"
    assert kern.algorithm_name == expect


@pytest.mark.parametrize("act", ["", "RELU", "RELUX", "HARDSIGMOID", "SIGMOID", "LEAKYRELU"])
@pytest.mark.parametrize("shape,o,k,pads", [((1, 1, 1, 22), 88, (1, 1), (0, 0, 0, 0)),   # an SE block's 1 x 1
                                            ((2, 1, 1, 8), 32, (1, 1), (0, 0, 0, 0)),
                                            ((1, 4, 4, 3), 5, (3, 3), (1, 1, 1, 1))])
def test_a_tiny_conv_is_one_compiled_product_a_chain_can_take(shape, o, k, pads, act, jit):
    """A conv over a map of a few values (Dense: the unrolled filter) is the compiled dense_rows
    loop with its bias and clip fused, any other activation a compiled loop after it (a 1 x 1
    one with a clip or none: the Direct loop): steps a chain calls (partials of numba's
    dispatchers), the reference's numbers."""
    rng = np.random.default_rng(o)
    x, consts, args = conv_case(rng, n=shape[0], h=shape[1], w=shape[2], c=shape[3], o=o, k=k,
                                pads=pads, act=act)
    got, want, kern = run_both("Conv2D", x, consts, args)
    assert kern.algorithm in ("dense", "direct")
    close(got, want, rtol=1e-5)
    if jit != "numpy":
        from mace.ops.fast.chain import _entry, _split_entry
        engine = Engine(one_op_graph("Conv2D", x, consts, args))
        engine.run({"x": x})   # (a pool split where the suite splits small work: chainable too)
        assert all(_entry(step) is not None or _split_entry(step) is not None
                   for step in engine._calls[0]), engine._calls[0]
