"""The compiled float activations and unary Eltwise (mace/ops/fast/activation.py, eltwise.py,
loops in _act_loops.py) against their numpy reference kernels, over edge cases.

Tolerances: the piecewise-linear kinds (PRELU, LEAKYRELU, HARDSWISH, HARDSIGMOID) and SQRT,
RSQRT, RECIPROCAL, NEG, ABS, SQUARE do the references' float32 operations in their order: the
same bytes, NaN where they give NaN. The transcendental kinds compute in float64 polynomials
(~1e-11 relative) and round once (SIGMOID and SiLU in float32, within 2 ulp of the truth); the references round numpy's float32 functions (or scipy's
float64 ones once), each within ~1 ulp of the true value: so ours is held to 2 ulp of the
reference. Where the reference itself is further from the true value than that (its
cancellations: SWISH's and GELU_TANH's 1 + tanh for large negative x, GELU's 1 + erf; numpy's
float32 functions, 3 ulp off in places), ours must instead be within 2 ulp of the true value (float64
math from the math module).
"""
import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mace.ops import activation as act_ref
from mace.ops import eltwise as eltwise_ref
from mace.ops.fast import _jit, _pool
from mace.ops.fast import activation as act_fast
from mace.ops.fast import eltwise as eltwise_fast
from mace.runtime.engine import Engine
from tests.ops.ir_graph import graph_of

# the priority list (issue 33 item 1): each must have a compiled kernel
PRIORITY_ACTIVATIONS = ["SIGMOID", "SWISH", "PRELU", "GELU", "GELU_TANH", "HARDSWISH",
                        "HARDSIGMOID", "LEAKYRELU", "TANH", "ELU", "SELU", "SOFTPLUS", "MISH"]
PRIORITY_UNARY = ["ERF", "EXP", "LOG", "SQRT", "RSQRT", "RECIPROCAL"]
# priority kinds whose reference is one numpy float32 ufunc pass (np.tanh, np.exp, np.log):
# vectorized by numpy already and measured as fast as a compiled loop or faster, so they stay
COMPILED_BY_NUMPY = {"TANH", "EXP", "LOG"}
EXACT = {"PRELU", "LEAKYRELU", "HARDSWISH", "HARDSIGMOID", "SQRT", "RSQRT", "RECIPROCAL", "NEG",
         "ABS", "SQUARE"}
ARGS = {"SWISH": dict(activation_coefficient=1.0), "ELU": dict(activation_coefficient=0.7),
        "SELU": dict(activation_coefficient=1.6732632, beta=1.050701),
        "LEAKYRELU": dict(activation_coefficient=0.1),
        "HARDSIGMOID": dict(activation_coefficient=0.2, max_limit=0.5)}

F32 = np.finfo(np.float32)
EDGES = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1e-40, -1e-40, F32.tiny,
                  -F32.tiny, 1e-30, -1e-30, 1e-7, -1e-7, 1e-4, -1e-4, 0.5, -0.5, 1.0, -1.0, 3.0,
                  -3.0, 6.0, -6.0, 9.5, -9.5, 15.0, -15.0, 30.0, -30.0, 40.0, -40.0, 88.7, 88.72,
                  89.0, -87.3, -103.0, -104.0, -120.0, 1e10, -1e10, 1e30, -1e30, F32.max, -F32.max],
                 np.float32)


def inputs(n_random=3000):
    rng = np.random.default_rng(11)
    x = np.concatenate([EDGES, np.linspace(-30, 30, 2001, dtype=np.float32),
                        (rng.standard_normal(n_random) * 4).astype(np.float32)])
    return x.reshape(-1, 16) if x.size % 16 == 0 else np.pad(x, (0, -x.size % 16)).reshape(-1, 16)


@pytest.fixture(params=["numba", "numba-serial"])
def jit(request, monkeypatch):
    """The compiled loops split across the compute pool's two threads, and serial."""
    if _jit.act_loops() is None:
        pytest.skip("numba is not installed")
    if request.param == "numba":
        if _pool.process_pool() is None:
            pytest.skip("no compute pool here")
        limit = threadpool_limits(2)
        request.addfinalizer(limit.restore_original_limits)
        monkeypatch.setattr(_pool, "MIN_PARALLEL_WORK", 0)
    else:
        monkeypatch.setenv("MACE_NO_POOL", "1")
    return request.param


def engines(op_type, x, args, consts=None):
    names = list(consts or {})
    graph = graph_of({"x": x.shape}, [(op_type, ["x"] + names, ["y"], args)], consts)
    return Engine(graph), Engine(graph, options={"reference_kernels": True})


def both(op_type, x, args, consts=None):
    fast, ref = engines(op_type, x, args, consts)
    assert fast.nodes[0].tag == "cpu:fast", f"{op_type} {args}: no compiled kernel chosen"
    with np.errstate(all="ignore"):
        return fast.run({"x": x})["y"], ref.run({"x": x})["y"]


def ulps(a, b) -> np.ndarray:
    """Distance in float32 steps (0 for two NaNs, huge for one)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    ia, ib = (v.view(np.int32).astype(np.int64) for v in (a, b))
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    d = np.abs(ia - ib)
    d[np.isnan(a) & np.isnan(b)] = 0
    d[np.isnan(a) ^ np.isnan(b)] = 1 << 40
    return d


def _sigmoid(v):
    return 1 / (1 + math.exp(-v)) if v >= 0 else math.exp(v) / (1 + math.exp(v))


def _softplus(v):
    return max(v, 0.0) + math.log1p(math.exp(-abs(v)))


TRUTH = {   # float64 maths, for where the reference is further off (its cancellations; numpy's
    # float32 log is 3 ulp off at 0.804768)
    "SIGMOID": _sigmoid, "ERF": math.erf, "SOFTPLUS": _softplus,
    "ELU": lambda v: v if v > 0 else 0.7 * math.expm1(v),
    "SELU": lambda v: 1.050701 * (v if v > 0 else 1.6732632 * math.expm1(v)),
    "SWISH": lambda v: v * _sigmoid(v),
    "GELU": lambda v: v * 0.5 * math.erfc(-v / math.sqrt(2)),
    "GELU_TANH": lambda v: v * _sigmoid(2 * math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)),
    "MISH": lambda v: v * math.tanh(_softplus(v)),
    "TANH": math.tanh,
}


def assert_close(kind, got, want, x):
    if kind in EXACT:
        np.testing.assert_array_equal(got, want)
        return
    d = ulps(got, want)
    bad = d > 2
    if bad.any() and kind in TRUTH:
        xs = x.astype(np.float64)[bad]
        with np.errstate(all="ignore"):
            truth = np.array([TRUTH[kind](v) if np.isfinite(v) else np.nan for v in xs])
        ok = (ulps(got[bad], truth) <= 2) | (np.isnan(truth) & ~np.isfinite(xs))
        ok |= np.isnan(truth) & (ulps(got[bad], want[bad]) <= 2)
        bad[bad] = ~ok
    i = np.flatnonzero(bad.ravel())[:5]
    assert not bad.any(), f"{kind}: {bad.sum()} off by > 2 ulp, e.g. x={x.ravel()[i]} " \
                          f"got={got.ravel()[i]} want={want.ravel()[i]}"


@pytest.mark.parametrize("kind", [k for k in PRIORITY_ACTIVATIONS
                                  if k != "PRELU" and k not in COMPILED_BY_NUMPY])
def test_activation_matches_reference(kind, jit):
    x = inputs()
    got, want = both("Activation", x, dict(activation=kind, **ARGS.get(kind, {})))
    assert_close(kind, got, want, x)


@pytest.mark.parametrize("kind,args", [("RELU", {}), ("RELUX", dict(max_limit=6.0)),
                                       ("CLIP", dict(activation_coefficient=-1.5, max_limit=2.0))])
def test_clip_activations_are_the_reference_bytes(kind, args):
    """RELU / RELUX / CLIP run np.clip's ufunc directly: the same bytes as the reference,
    -0.0 kept and NaN through (np.maximum would turn -0.0 into 0.0)."""
    x = inputs()
    got, want = both("Activation", x, dict(activation=kind, **args))
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    negative_zero = (x == 0) & np.signbit(x)
    assert negative_zero.any() and np.signbit(got[negative_zero]).all()


@pytest.mark.parametrize("kind", [k for k in PRIORITY_UNARY if k not in COMPILED_BY_NUMPY]
                         + ["NEG", "ABS", "SQUARE"])
def test_unary_eltwise_matches_reference(kind, jit):
    x = inputs()
    got, want = both("Eltwise", x, dict(type=kind))
    assert_close(kind, got, want, x)


@pytest.mark.parametrize("shape", [(0, 16), (1,), (3, 5, 7, 1)])
@pytest.mark.parametrize("kind", ["SIGMOID", "GELU", "HARDSWISH"])
def test_small_and_empty_tensors(kind, shape, jit):
    x = (np.random.default_rng(1).standard_normal(shape) * 3).astype(np.float32)
    got, want = both("Activation", x, dict(activation=kind))
    assert got.shape == want.shape == shape
    assert_close(kind, got, want, x)


@pytest.mark.parametrize("slope_shape", [(16,), (1, 16), (1,), ()])
def test_prelu_per_channel_slope_is_exact(slope_shape, jit):
    x = inputs().reshape(-1, 4, 16)
    slope = np.random.default_rng(2).uniform(-0.5, 0.5, slope_shape).astype(np.float32)
    got, want = both("Activation", x, dict(activation="PRELU"), {"slope": slope})
    assert_close("PRELU", got, want, x)


@pytest.mark.parametrize("kind", ["SIGMOID", "LEAKYRELU", "HARDSWISH", "HARDSIGMOID", "TANH"])
def test_fused_activation_of_conv_epilogues(kind):
    """_base.activation_fn (a conv's / FC's fused activation, in place) runs the compiled loop
    where there is one, apply_activation on a strided view and for the other kinds."""
    from mace.ops._common import apply_activation
    from mace.ops.fast._base import activation_fn
    act = dict(act=kind, alpha=0.2, max_limit=0.5)
    x = inputs()
    with np.errstate(all="ignore"):
        want = apply_activation(x.copy(), **act)
        got = activation_fn(act)(x.copy())
        strided = x.copy()
        activation_fn(act)(strided[:, ::2])
    assert_close(kind if kind != "TANH" else "NEG", got, want, x)   # TANH: np.tanh, the same bytes
    np.testing.assert_array_equal(strided[:, ::2], want[:, ::2])
    np.testing.assert_array_equal(strided[:, 1::2], x[:, 1::2])


@pytest.mark.parametrize("op_type,args,consts", [
    ("Activation", dict(activation="SIGMOID"), None), ("Activation", dict(activation="HARDSWISH"), None),
    ("Activation", dict(activation="PRELU"), {"slope": np.linspace(-1, 1, 16, dtype=np.float32)}),
    ("Eltwise", dict(type="ERF"), None), ("Eltwise", dict(type="RSQRT"), None)])
def test_in_place_and_overlapping_buffers(op_type, args, consts, jit):
    """x is out: the one-array loops (two aliased arrays would run LLVM's scalar fallback);
    x and out overlapping otherwise: the reference. Either way the reference's values."""
    x = inputs(200)
    fast, ref = engines(op_type, x, args, consts)
    kern = fast.nodes[0].kernel
    extra = [fast.nodes[0].inputs[1]] if consts else []
    with np.errstate(all="ignore"):
        want = ref.run({"x": x})["y"]
        y = x.copy()
        kern.bind([y] + extra, [y])()
        assert_close(args.get("activation") or args["type"], y, want, x)
        buf = np.concatenate([x.ravel(), np.zeros(16, np.float32)])
        src, dst = buf[:x.size].reshape(x.shape), buf[16:].reshape(x.shape)
        kern.bind([src] + extra, [dst])()
        assert_close(args.get("activation") or args["type"], dst, want, x)


def test_prelu_slope_along_another_axis_runs_the_reference():
    x = inputs().reshape(-1, 4, 16)
    fast, _ = engines("Activation", x, dict(activation="PRELU"),
                      {"slope": np.full((4, 1), 0.25, np.float32)})
    assert fast.nodes[0].tag == "cpu"


def test_unary_ufunc_with_a_fused_relu_is_the_reference_bytes():
    """EXP has no loop of ours: numpy's ufunc into the output, then the clip (the same bytes)."""
    x = inputs()
    got, want = both("Eltwise", x, dict(type="EXP", activation="RELUX", max_limit=6.0))
    np.testing.assert_array_equal(got, want)


def test_round_is_rint_with_the_references_bytes():
    """ROUND (the reference's np.round) as np.rint into the output: half-way cases to even, -0.0
    kept, NaN and inf through (a ConvInteger lowering rounds every conv's sum)."""
    x = np.concatenate([inputs().ravel(), np.arange(-8.5, 8.5, 0.5, dtype=np.float32),
                        np.float32([-0.4, -0.0, 2.5e9, 1e-40])])
    x = np.pad(x, (0, -x.size % 16)).reshape(-1, 16)
    got, want = both("Eltwise", x, dict(type="ROUND"))
    assert got.tobytes() == want.tobytes()


def test_without_numba_the_references_run(monkeypatch):
    """MACE_NO_JIT=1 (or no numba): the fast kernels decline and the numpy references run."""
    monkeypatch.setattr(act_fast, "act_loops", lambda: None)
    monkeypatch.setattr(eltwise_fast, "act_loops", lambda: None)
    x = inputs(100)
    for op_type, args in [("Activation", dict(activation="SIGMOID")), ("Eltwise", dict(type="ERF"))]:
        fast, ref = engines(op_type, x, args)
        assert fast.nodes[0].tag == "cpu"
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(fast.run({"x": x})["y"], ref.run({"x": x})["y"])


def test_no_jit_env_turns_the_loops_off(monkeypatch):
    monkeypatch.setenv("MACE_NO_JIT", "1")
    _jit.loops.cache_clear()
    _jit.act_loops.cache_clear()
    try:
        assert _jit.act_loops() is None
    finally:
        monkeypatch.delenv("MACE_NO_JIT")
        _jit.loops.cache_clear()
        _jit.act_loops.cache_clear()


def test_every_priority_type_has_a_compiled_kernel():
    """The meta-test: of the float Activation kinds and unary Eltwise types the references
    run, each on the priority list has a compiled kernel (the fast kernel is chosen), or is
    one of numpy's own vectorized float32 ufuncs (COMPILED_BY_NUMPY)."""
    reference_unary = {k for k in eltwise_ref.UNARY if k not in eltwise_ref.BOOL_RESULT}
    reference_acts = {k.strip(".()") for k in act_ref.__doc__.replace(",", " ").split()} | {"GELU_TANH"}
    missing = [k for k in PRIORITY_UNARY if k not in eltwise_fast.UNARY_CODES]
    missing += [k for k in PRIORITY_ACTIVATIONS if k not in act_fast.COMPILED]
    missing = [k for k in missing if k not in COMPILED_BY_NUMPY]
    assert not missing, f"priority types on the numpy reference only: {missing}"
    assert set(PRIORITY_UNARY) <= reference_unary
    assert set(PRIORITY_ACTIVATIONS) <= reference_acts
    if _jit.act_loops() is None:
        pytest.skip("numba is not installed: the selection half needs the loops")
    x = inputs(10)
    for kind in (k for k in PRIORITY_ACTIVATIONS if k not in COMPILED_BY_NUMPY):
        consts = {"slope": np.float32([0.2])} if kind == "PRELU" else None
        fast, _ = engines("Activation", x, dict(activation=kind, **ARGS.get(kind, {})), consts)
        assert fast.nodes[0].tag == "cpu:fast", kind
    for kind in (k for k in PRIORITY_UNARY if k not in COMPILED_BY_NUMPY):
        assert engines("Eltwise", x, dict(type=kind))[0].nodes[0].tag == "cpu:fast", kind


def test_codes_agree_with_the_loops():
    loops = _jit.act_loops()
    if loops is None:
        pytest.skip("numba is not installed")
    for kind, code in {**act_fast.CODES, **eltwise_fast.UNARY_CODES}.items():
        assert getattr(loops, kind) == code, kind


@pytest.mark.parametrize("kind", ["SUM", "SUB", "PROD", "DIV", "MIN", "MAX"])
@pytest.mark.parametrize("const_shape,first", [((), False), ((1,), True), ((16,), False),
                                               ((1, 1, 16), True)])
@pytest.mark.parametrize("act", ["", "RELUX"])
def test_eltwise_against_a_constant_is_exact(kind, const_shape, first, act, jit):
    """A tensor against one number or one per channel, either side, with a fused clip: the
    reference's float32 operation and np.clip, so the same bytes (NaN, inf, signed zeros)."""
    # one number over 2304 values: rows of 256 (SCALAR_ROW); over 2368: rows of the 16 channels
    x = inputs(400)[:144 if const_shape == () else 148].reshape(-1, 4, 16)
    c = np.random.default_rng(3).uniform(-4, 4, const_shape).astype(np.float32)
    if c.size > 2:
        c.ravel()[:3] = [0.0, -0.0, np.inf]
    names = ["c", "x"] if first else ["x", "c"]
    args = dict(type=kind, **(dict(activation=act, max_limit=6.0) if act else {}))
    graph = graph_of({"x": x.shape}, [("Eltwise", names, ["y"], args)], {"c": c})
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast"
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(fast.run({"x": x})["y"], ref.run({"x": x})["y"])
        y = x.copy()   # in place (x is out): the one-array loop
        kern, extra = fast.nodes[0].kernel, [fast.nodes[0].inputs[names.index("c")]]
        kern.bind(extra + [y] if first else [y] + extra, [y])()
        np.testing.assert_array_equal(y, ref.run({"x": x})["y"])


@pytest.mark.parametrize("kind", ["SUM", "SUB", "PROD", "DIV", "MIN", "MAX", "GREATER", "EQUAL"])
@pytest.mark.parametrize("other_shape", [(4, 1), (1, 1, 16), (1,), (3, 4, 16)])
@pytest.mark.parametrize("first", [False, True])
def test_eltwise_broadcasts_are_the_reference_bytes(kind, other_shape, first):
    """Any broadcast of two runtime float32 tensors (a per-channel one through the compiled
    const_binary loop, the others numpy's ufunc into the output) and a constant along a middle
    axis: the reference's bytes (NaN, inf, signed zeros on both sides)."""
    x = inputs(100)[:12].reshape(3, 4, 16)
    other = np.random.default_rng(5).uniform(-3, 3, other_shape).astype(np.float32)
    edges = [np.nan, -np.inf] + ([] if kind in ("MIN", "MAX") else [-0.0])   # (which of two equal
    edges = edges[:other.size]   # zeros numpy's SIMD min / max keeps is its own)
    other.ravel()[:len(edges)] = edges
    names = ["o", "x"] if first else ["x", "o"]
    for graph in (graph_of({"x": x.shape, "o": other_shape}, [("Eltwise", names, ["y"], dict(type=kind))]),
                  graph_of({"x": x.shape}, [("Eltwise", names, ["y"], dict(type=kind))], {"o": other})):
        fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
        assert fast.nodes[0].tag == "cpu:fast"
        feed = {"x": x, "o": other} if "o" in [i.name for i in graph.net.input_info] else {"x": x}
        with np.errstate(all="ignore"):
            got, want = fast.run(feed)["y"], ref.run(feed)["y"]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("act", ["SIGMOID", "RELUX", "HARDSWISH"])
def test_eltwise_with_a_fused_activation_after_a_broadcast(act):
    """ppocr_v4_det's last Add + SIGMOID, an SE block's x * scale with a clip: the loop, then the
    activation in place (the compiled SIGMOID within 2 ulp of the reference, the rest exact)."""
    x = inputs(100)[:12].reshape(3, 4, 16)
    scale = np.random.default_rng(6).uniform(0, 2, (1, 1, 16)).astype(np.float32)
    args = dict(type="PROD", activation=act, max_limit=6.0)
    for graph in (graph_of({"x": x.shape, "s": scale.shape}, [("Eltwise", ["x", "s"], ["y"], args)]),
                  graph_of({"x": x.shape}, [("Eltwise", ["x", "s"], ["y"], args)], {"s": scale})):
        fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
        assert fast.nodes[0].tag == "cpu:fast"
        feed = {"x": x, "s": scale}
        feed = {k: v for k, v in feed.items() if k in [i.name for i in graph.net.input_info]}
        with np.errstate(all="ignore"):
            got, want = fast.run(feed)["y"], ref.run(feed)["y"]
        assert ulps(got, want).max() <= (2 if act == "SIGMOID" else 0)


@pytest.mark.parametrize("shape, const", [((2, 0), np.zeros((0,), np.float32)), ((0, 3), np.ones(3, np.float32)),
                                          ((1, 4, 0), np.float32([2.0]))])
def test_constant_eltwise_of_an_empty_tensor_is_an_empty_result(shape, const):
    # a TensorFlow strided slice of nothing, plus a constant: the fast kernel must not index into it
    graph = graph_of({"x": shape}, [("Eltwise", ["x", "c"], ["y"], {"type": "SUM"})], {"c": const})
    out = Engine(graph).run({"x": np.zeros(shape, np.float32)})["y"]
    assert out.shape == shape and out.size == 0


@pytest.mark.parametrize("kind", ["SIGMOID", "SWISH", "GELU", "GELU_TANH", "ELU", "SELU", "SOFTPLUS", "MISH",
                                  "HARDSWISH", "HARDSIGMOID", "LEAKYRELU", "TANH", "PRELU"])
def test_store_step_activation_matches_reference(kind):
    """_act_loops.store_rows, a conv's / FC's fused activation in the packed GEMM's (and the
    depthwise loop's) store step: in place over rows `ld` floats apart (a Concat's channel
    slice), the reference Activation's values within the kinds' tolerances (TANH: 2 ulp of
    np.tanh or of the truth), the floats between the rows untouched."""
    import ctypes

    from mace.ops.fast._act_codes import STORE_CODES, params
    lib = _jit.act_loops()
    if lib is None:
        pytest.skip("numba is not installed")
    x = inputs()
    args = dict(activation=kind, **ARGS.get(kind, {}))
    slope = np.linspace(-1, 1, 16, dtype=np.float32)
    consts = {"slope": slope} if kind == "PRELU" else None
    with np.errstate(all="ignore"):
        want = engines("Activation", x, args, consts)[1].run({"x": x})["y"]
    big = np.full((x.shape[0], 24), 7, np.float32)
    big[:, 3:19] = x
    a, b = params(kind, args.get("activation_coefficient", 0.0), args.get("max_limit", 0.0), args.get("beta", 0.0))
    ptr = ctypes.POINTER(ctypes.c_float)
    lib.store_rows.ctypes(big[:, 3:].ctypes.data_as(ptr), x.shape[0], 16, 24, STORE_CODES[kind], a, b,
                          slope.ctypes.data_as(ptr) if kind == "PRELU" else None)
    assert_close(kind, big[:, 3:19], want, x)
    assert (big[:, :3] == 7).all() and (big[:, 19:] == 7).all()


@pytest.mark.parametrize("kind, split", [("GELU", True), ("SIGMOID", True), ("HARDSWISH", False)])
def test_a_transcendental_activation_splits_where_a_cheap_one_stays_serial(kind, split):
    """The pool's split rule counts a polynomial kind's element ~10 copies' worth (1-2.5 ns
    against ~0.1): a MiniLM's GELU of 16 x 1536 (50 us on one thread) splits across two
    threads, a HARDSWISH of the same size (a few us) stays in the calling thread; both give
    the serial loop's values."""
    if _jit.act_loops() is None or _pool.process_pool() is None:
        pytest.skip("no compiled loops or no compute pool here")
    x = np.random.default_rng(3).standard_normal((1, 16, 1536)).astype(np.float32) * 3
    graph = graph_of({"x": x.shape}, [("Activation", ["x"], ["y"], {"activation": kind})])
    with threadpool_limits(2):
        pooled = Engine(graph, options={"num_threads": 2})
        serial = Engine(graph, options={"num_threads": 1})
        step = pooled._steps[0]
        serial_loop = getattr(step, "func", None) is getattr(_jit.act_loops(), "unary" if kind != "HARDSWISH"
                                                             else "exact")
        assert serial_loop != split
        np.testing.assert_array_equal(pooled.run({"x": x})["y"], serial.run({"x": x})["y"])


@pytest.mark.parametrize("kind", ["SIGMOID", "SWISH"])
def test_float32_sigmoid_and_silu_within_2_ulp_across_float32(kind):
    """SIGMOID and SWISH with alpha 1 (SiLU) run in float32 arithmetic (_act_loops._sigmoid32):
    over every 4099th float32 bit pattern (a million values, subnormals and both infinities
    among them) and every float32 in [-90, -80] (x exp(x) near the subnormals), within 2 ulp of
    the float64 truth; NaN where x is NaN (and for -inf * sigmoid(-inf), as numpy's)."""
    loops = _jit.act_loops()
    if loops is None:
        pytest.skip("numba is not installed")
    pattern = np.arange(0, 2 ** 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = np.arange(np.float32(-90).view(np.uint32), np.float32(-80).view(np.uint32), -1,
                     dtype=np.int64)[::-1]
    x = np.concatenate([pattern, near.astype(np.uint32).view(np.float32),
                        np.array([np.inf, -np.inf, -0.0, 0.0], np.float32)])
    got = np.empty_like(x)
    loops.unary(x, act_fast.CODES[kind], np.float32(1), np.float32(0), got, 0, x.size)
    v = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(v))
        sig = np.where(v >= 0, 1 / (1 + e), e / (1 + e))
        truth = v * sig if kind == "SWISH" else sig
    finite = np.isfinite(truth)
    spacing = np.spacing(np.abs(truth[finite]).astype(np.float32)).astype(np.float64)
    err = np.abs(got[finite].astype(np.float64) - truth[finite]) / spacing
    assert err.max() <= 2, f"{kind}: {err.max():.2f} ulp at x={x[finite][err.argmax()]!r}"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(truth))
    assert got[x == np.inf][0] == (np.inf if kind == "SWISH" else 1)
    zeros = got[(x == 0)]   # -0.0 and 0.0: x sigmoid(x) keeps the sign, as numpy's product does
    assert (np.signbit(zeros) == (np.signbit(x[x == 0]) & (kind == "SWISH"))).all()
    assert (np.isnan(got[x == -np.inf][0]) if kind == "SWISH" else got[x == -np.inf][0] == 0)
