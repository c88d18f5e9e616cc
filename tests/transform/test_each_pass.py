"""One unit test per pass (issue 32): each pass function alone, on the smallest graph that shows
what it does, checked for the rewrite it makes and for outputs equal to the graph before it
(reference kernels on both sides). A meta-test keeps the table complete: every pass of the
pipeline's PASSES has a case here or names the test module that exercises it alone.
"""
from __future__ import annotations

import numpy as np
import pytest

from mace.ir.args import get_arg, set_arg
from mace.ir.quant_params import weight_params
from mace.runtime.engine import Engine
from mace.transform.passes.cleanup import remove_dead_ops, remove_identity, skip_integral_casts
from mace.transform.passes.fold_constants import fold_constants
from mace.transform.passes.fold_into_batchnorm import fold_into_batchnorm
from mace.transform.passes.fold_transposes import fold_transposes
from mace.transform.passes.fuse_layer_norm import fuse_layer_norm
from mace.transform.passes.merge_constants import merge_constants
from mace.transform.passes.sort import sort_topologically
from mace.transform.passes.winograd import mark_winograd
from mace.transform.pipeline import PASSES
from tests.ops.ir_graph import graph_of

RNG = np.random.default_rng(11)
X = RNG.normal(size=(1, 4, 4, 8)).astype(np.float32)


def _types(graph) -> list:
    return [op.type for op in graph.net.op]


def _outputs(graph, x=X) -> dict:
    return Engine(graph, options={"reference_kernels": True}).run({"x": x})


def _check(build, pass_fn, before: list, after: list, options=None, x=X, rtol=1e-5, changes=True):
    """Run `pass_fn` alone on build()'s graph to its fixpoint, as the pipeline does: op types
    before/after, outputs unchanged."""
    original, graph = build(), build()
    assert _types(original) == before
    assert bool(pass_fn(graph, options or {})) == changes or changes is None
    for _ in range(10):
        if not pass_fn(graph, options or {}):
            break
    assert _types(graph) == after
    want, got = _outputs(original, x), _outputs(graph, x)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=1e-6)
    return graph


def test_remove_identity():
    build = lambda: graph_of({"x": X.shape}, [("Identity", ["x"], ["i"], {}),  # noqa: E731
                                             ("Activation", ["i"], ["y"], {"activation": "RELU"})])
    _check(build, remove_identity, ["Identity", "Activation"], ["Activation"])


def test_remove_dead_ops():
    build = lambda: graph_of({"x": X.shape}, [("Activation", ["x"], ["y"], {"activation": "RELU"}),  # noqa: E731
                                             ("Activation", ["x"], ["unused"], {"activation": "TANH"})],
                             {"nobody": np.ones(3, np.float32)})
    graph = _check(build, remove_dead_ops, ["Activation", "Activation"], ["Activation"])
    assert "nobody" not in graph.consts


def test_fold_constants():
    consts = {"a": RNG.normal(size=(8,)).astype(np.float32), "b": RNG.normal(size=(8,)).astype(np.float32)}
    build = lambda: graph_of({"x": X.shape}, [("Eltwise", ["a", "b"], ["c"], {"type": "SUM"}),  # noqa: E731
                                             ("Eltwise", ["x", "c"], ["y"], {"type": "PROD"})], consts)
    graph = _check(build, fold_constants, ["Eltwise", "Eltwise"], ["Eltwise"])
    np.testing.assert_array_equal(graph.consts["c"], consts["a"] + consts["b"])


def test_sort_topologically():
    def build():
        graph = graph_of({"x": X.shape}, [("Activation", ["x"], ["a"], {"activation": "RELU"}),
                                          ("Activation", ["a"], ["y"], {"activation": "TANH"})])
        graph.set_ops(list(reversed(graph.net.op)))   # as a frontend may leave them: readers first
        return graph

    graph = build()
    assert sort_topologically(graph, {}) is not False
    assert [get_arg(op, "activation") for op in graph.net.op] == ["RELU", "TANH"]
    np.testing.assert_allclose(_outputs(graph)["y"], np.tanh(np.maximum(X, 0)), rtol=1e-6)


def test_fold_transposes():
    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("Transpose", ["x"], ["t1"], {"dims": [0, 3, 1, 2]}),
        ("Transpose", ["t1"], ["t2"], {"dims": [0, 2, 3, 1]}),
        ("Activation", ["t2"], ["y"], {"activation": "RELU"})])
    _check(build, fold_transposes, ["Transpose", "Transpose", "Activation"], ["Activation"])


def test_fuse_layer_norm():
    x = RNG.normal(size=(1, 6, 16)).astype(np.float32)
    consts = {"eps": np.float32([1e-5]), "two": np.float32([2.0]),
              "gamma": RNG.uniform(0.5, 1.5, 16).astype(np.float32), "beta": RNG.normal(size=16).astype(np.float32)}
    ops = [("Reduce", ["x"], ["mu"], {"reduce_type": "MEAN", "axis": [-1], "keepdims": 1}),
           ("Eltwise", ["x", "mu"], ["d"], {"type": "SUB"}),
           ("Eltwise", ["d", "two"], ["sq"], {"type": "POW"}),
           ("Reduce", ["sq"], ["var"], {"reduce_type": "MEAN", "axis": [-1], "keepdims": 1}),
           ("Eltwise", ["var", "eps"], ["ve"], {"type": "SUM"}),
           ("Eltwise", ["ve"], ["sd"], {"type": "SQRT"}),
           ("Eltwise", ["d", "sd"], ["n"], {"type": "DIV"}),
           ("Eltwise", ["n", "gamma"], ["g"], {"type": "PROD"}),
           ("Eltwise", ["g", "beta"], ["y"], {"type": "SUM"})]
    build = lambda: graph_of({"x": x.shape}, ops, consts)  # noqa: E731
    graph = _check(build, fuse_layer_norm, ["Reduce", "Eltwise", "Eltwise", "Reduce", "Eltwise", "Eltwise",
                                            "Eltwise", "Eltwise", "Eltwise"], ["LayerNorm"], x=x, rtol=1e-4)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-5) * consts["gamma"] + consts["beta"]
    np.testing.assert_allclose(_outputs(graph, x)["y"], want, rtol=1e-4, atol=1e-5)


def test_fold_into_batchnorm():
    c = 8
    consts = {"scale": RNG.uniform(0.5, 1.5, c).astype(np.float32), "offset": RNG.normal(size=c).astype(np.float32),
              "c1": RNG.uniform(0.5, 2.0, c).astype(np.float32), "c2": RNG.normal(size=c).astype(np.float32)}
    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("BatchNorm", ["x", "scale", "offset"], ["b"], {"data_format": "NHWC"}),
        ("Eltwise", ["b", "c1"], ["p"], {"type": "PROD"}),
        ("Eltwise", ["p", "c2"], ["y"], {"type": "SUM", "activation": "RELU"})], consts)
    graph = _check(build, fold_into_batchnorm, ["BatchNorm", "Eltwise", "Eltwise"], ["BatchNorm"])
    assert get_arg(graph.net.op[0], "activation") == "RELU"


def test_mark_winograd():
    w = RNG.normal(size=(16, 8, 3, 3)).astype(np.float32)
    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("Conv2D", ["x", "w"], ["y"], {"strides": [1, 1], "padding_values": [1, 1, 1, 1], "data_format": "NHWC"})],
        {"w": w})
    graph = _check(build, mark_winograd, ["Conv2D"], ["Conv2D"], options={"winograd": 4}, rtol=1e-4)
    assert get_arg(graph.net.op[0], "winograd", 0) == 4
    untouched = build()
    mark_winograd(untouched, {})
    assert get_arg(untouched.net.op[0], "winograd", 0) == 0


def test_merge_constants():
    # each step of an unrolled loop reads its own copy of one weight: one constant left, read by both
    sq = RNG.normal(size=(16, 16)).astype(np.float32)
    build = lambda: graph_of({"x": (4, 16)}, [("MatMul", ["x", "w_step0"], ["h"], {}),  # noqa: E731
                                              ("MatMul", ["h", "w_step1"], ["y"], {})],
                             {"w_step0": sq, "w_step1": sq.copy()})
    x16 = RNG.normal(size=(4, 16)).astype(np.float32)
    graph = _check(build, merge_constants, ["MatMul", "MatMul"], ["MatMul", "MatMul"], x=x16)
    assert list(graph.consts) == ["w_step0"] and [op.input[1] for op in graph.net.op] == ["w_step0"] * 2
    # one element apart, or equal bytes quantized differently: kept apart
    other = sq.copy()
    other[7, 3] += 1
    apart = graph_of({"x": (4, 16)}, [("MatMul", ["x", "a"], ["h"], {}), ("MatMul", ["h", "b"], ["y"], {})],
                     {"a": sq, "b": other})
    assert not merge_constants(apart, {}) and set(apart.consts) == {"a", "b"}
    q = np.full((32, 32), 3, np.int8)
    quantized = graph_of({"x": (4, 16)}, [("Activation", ["x"], ["y"], {"activation": "RELU"})],
                         {"qa": q, "qb": q.copy(), "qc": q.copy()})
    quantized.quant.update({"qa": weight_params(np.ones((32, 32), np.float32), 0),
                            "qb": weight_params(np.ones((32, 32), np.float32), 0),
                            "qc": weight_params(np.full((32, 32), 2, np.float32), 0)})
    assert merge_constants(quantized, {}) and set(quantized.consts) == {"qa", "qc"}


# Passes whose behaviour a named test module checks (alone or through the pipeline); the cases
# above cover the rest.
ELSEWHERE = {
    "infer_shapes": "tests/transform (every case: graph_of infers shapes)",
    "lower_fake_quantize": "tests/quantize/test_qat.py",
    "flatten_atrous_conv": "tests/transform/test_flatten_atrous_conv.py",
    "fold_batchnorm": "tests/transform/test_transform.py",
    "fuse_gelu": "tests/transform/test_transformer_speed.py",
    "fuse_hardswish": "tests/transform/test_transformer_speed.py",
    "fuse_activation": "tests/transform/test_transform.py",
    "to_nhwc": "tests/transform/test_transform.py",
    "fold_channel_shuffle": "tests/transform/test_channel_shuffle.py",
    "fold_flatten_transpose": "tests/onnx (flattening classifiers)",
    "place_ops": "tests/transform/test_placement.py",
    "quantize": "tests/quantize",
    "mark_ragged": "tests/onnx/test_data_dependent_outputs.py",
}
HERE = {"remove_identity", "remove_dead_ops", "fold_constants", "sort_topologically", "fold_transposes",
        "fuse_layer_norm", "fold_into_batchnorm", "mark_winograd", "fuse_paddle_hardswish", "fold_reshape_pairs",
        "fold_affine_into_conv", "fuse_skip_layer_norm", "merge_constants", "skip_integral_casts",
        "fold_pad_into_conv", "fuse_matmul_integer_to_float", "fuse_stream_buffer"}


def test_every_pass_has_a_unit_test():
    names = {p.name for p in PASSES}
    base = {n.removesuffix("_final").removesuffix("_after_layout").replace("fold_constants_after", "fold_constants")
            for n in names}
    missing = sorted(n for n in base if n not in HERE and n not in ELSEWHERE)
    assert missing == [], f"passes without a unit test: {missing} (add a case here)"


@pytest.mark.parametrize("name", sorted(HERE))
def test_the_cases_here_are_real_passes(name):
    assert name in {p.fn.__name__ for p in PASSES} | {p.name for p in PASSES}


@pytest.mark.parametrize("options, fused", [({}, True), ({"runtime": "cpu"}, True), ({"runtime": "gpu"}, False),
                                            ({"quantize": True}, False)])
def test_fuse_hardswish_fuses_silu_on_the_cpu_only(options, fused):
    from mace.transform.passes.fuse_hardswish import fuse_hardswish

    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("Activation", ["x"], ["s"], {"activation": "SIGMOID"}),
        ("Eltwise", ["x", "s"], ["y"], {"type": "PROD"})])
    after = ["Activation"] if fused else ["Activation", "Eltwise"]
    graph = _check(build, fuse_hardswish, ["Activation", "Eltwise"], after, options=options, changes=fused)
    if fused:
        assert get_arg(graph.net.op[0], "activation") == "SWISH"
        np.testing.assert_allclose(_outputs(graph)["y"], X / (1 + np.exp(-X)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("options, fused", [({}, True), ({"runtime": "gpu"}, False), ({"quantize": True}, False)])
def test_fuse_activation_folds_swish_into_the_conv_on_the_cpu_only(options, fused):
    """SiLU (SWISH after fuse_hardswish) becomes the conv's fused activation: the packed GEMM
    applies it as it stores (issue 33 item 2); the GPU and int8 kernels have no SWISH."""
    from mace.transform.passes.fuse_activation import fuse_activation

    w = RNG.normal(size=(6, 8, 3, 3)).astype(np.float32)
    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("Conv2D", ["x", "w"], ["c"], {"strides": [1, 1], "padding_values": [1, 1, 1, 1], "data_format": "NHWC"}),
        ("Activation", ["c"], ["y"], {"activation": "SWISH", "activation_coefficient": 1.0})], {"w": w})
    after = ["Conv2D"] if fused else ["Conv2D", "Activation"]
    graph = _check(build, fuse_activation, ["Conv2D", "Activation"], after, options=options, changes=fused,
                   rtol=1e-4)
    if fused:
        assert get_arg(graph.net.op[0], "activation") == "SWISH"
        assert get_arg(graph.net.op[0], "activation_coefficient") == 1.0
        fast = Engine(graph).run({"x": X})["y"]   # the packed GEMM's store step
        np.testing.assert_allclose(fast, _outputs(graph)["y"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind, args", [("RELU", {}), ("SIGMOID", {}), ("RELUX", {"max_limit": 0.5}),
                                        ("SWISH", {"activation_coefficient": 1.0})])
@pytest.mark.parametrize("options, fused", [({}, True), ({"runtime": "gpu"}, False), ({"quantize": True}, False)])
def test_fuse_activation_folds_into_a_layer_norm_on_the_cpu_only(kind, args, options, fused):
    """LayerNorm -> ReLU (openWakeWord's heads) becomes one LayerNorm with a fused activation on
    CPU float models: one step fewer; the reference and the fast kernel apply it to output 0."""
    from mace.transform.passes.fuse_activation import fuse_activation

    consts = {"s": RNG.normal(size=(8,)).astype(np.float32), "b": RNG.normal(size=(8,)).astype(np.float32)}
    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("LayerNorm", ["x", "s", "b"], ["n"], {"axis": -1, "epsilon": 1e-5}),
        ("Activation", ["n"], ["y"], {"activation": kind, **args})], consts)
    after = ["LayerNorm"] if fused else ["LayerNorm", "Activation"]
    graph = _check(build, fuse_activation, ["LayerNorm", "Activation"], after, options=options, changes=fused)
    if fused:
        assert get_arg(graph.net.op[0], "activation") == kind
        engine = Engine(graph)
        assert engine.nodes[0].tag == "cpu:fast"
        np.testing.assert_allclose(engine.run({"x": X})["y"], _outputs(build())["y"], rtol=1e-5, atol=1e-6)
        x = X.copy()
        x[0, 0, 0, 3] = np.nan   # that row all NaN, through the clip as np.clip lets it
        got, want = engine.run({"x": x})["y"], _outputs(build(), x)["y"]
        assert np.isnan(got[0, 0, 0]).all() and np.isnan(want[0, 0, 0]).all()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", ["clip", "fused_clip", "mul_sixth", "swapped"])
def test_fuse_paddle_hardswish(form):
    """Paddle2ONNX's x * clip(x + 3, 0, 6) / 6 (Add, Clip, Mul, Div) -> one HARDSWISH, in the
    spellings exporters use: the clip its own op or fused into the Add, / 6 or * 1/6, either order."""
    from mace.transform.passes.fuse_paddle_hardswish import fuse_paddle_hardswish

    consts = {"three": np.float32([3.0]), "six": np.float32(6.0), "sixth": np.float32([1 / 6])}
    x = (RNG.normal(size=X.shape) * 4).astype(np.float32)   # across the clip's both ends
    relux = {"activation": "RELUX", "max_limit": 6.0}
    plus = [("Eltwise", ["three", "x"] if form == "swapped" else ["x", "three"], ["s"], {"type": "SUM"})]
    if form == "fused_clip":
        plus = [("Eltwise", ["x", "three"], ["g"], {"type": "SUM", **relux})]
    else:
        plus.append(("Activation", ["s"], ["g"], relux if form != "swapped" else
                     {"activation": "CLIP", "activation_coefficient": 0.0, "max_limit": 6.0}))
    prod = ("Eltwise", ["g", "x"] if form == "swapped" else ["x", "g"], ["p"], {"type": "PROD"})
    last = ("Eltwise", ["p", "sixth"], ["y"], {"type": "PROD"}) if form == "mul_sixth" else \
        ("Eltwise", ["p", "six"], ["y"], {"type": "DIV"})
    ops = plus + [prod, last]
    build = lambda: graph_of({"x": X.shape}, ops, consts)  # noqa: E731
    graph = _check(build, fuse_paddle_hardswish, [op[0] for op in ops], ["Activation"], x=x)
    assert get_arg(graph.net.op[0], "activation") == "HARDSWISH"


def test_fuse_paddle_hardswish_leaves_other_gates():
    """x * clip(x + 3, 0, 5) / 6 is not a hardswish; nor is a gate read twice."""
    from mace.transform.passes.fuse_paddle_hardswish import fuse_paddle_hardswish

    consts = {"three": np.float32([3.0]), "six": np.float32(6.0)}
    for limit, extra in ((5.0, False), (6.0, True)):
        ops = [("Eltwise", ["x", "three"], ["g"], {"type": "SUM", "activation": "RELUX", "max_limit": limit}),
               ("Eltwise", ["x", "g"], ["p"], {"type": "PROD"}), ("Eltwise", ["p", "six"], ["y"], {"type": "DIV"})]
        outputs = ["y"]
        if extra:
            ops.append(("Activation", ["g"], ["z"], {"activation": "RELU"}))
            outputs.append("z")
        graph = graph_of({"x": X.shape}, ops, consts, outputs)
        assert not fuse_paddle_hardswish(graph, {})


def test_fold_reshape_pairs():
    """A 1-D conv's Reshape out, its ReLU, the next conv's Reshape in: the ReLU moves before the
    Reshape, the Reshape pair cancels (issue 33 item 6); one that changes the shape stays, merged."""
    from mace.transform.passes.fold_reshape_pairs import fold_reshape_pairs

    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("Reshape", ["x"], ["r1"], {"dims": [1, 16, 8]}),
        ("Activation", ["r1"], ["a"], {"activation": "RELU"}),
        ("Reshape", ["a"], ["r2"], {"dims": [1, 4, 4, 8]}),
        ("Activation", ["r2"], ["b"], {"activation": "TANH"}),
        ("Reshape", ["b"], ["r3"], {"dims": [1, 2, 64]}),
        ("Eltwise", ["r3"], ["c"], {"type": "ABS"}),
        ("Reshape", ["c"], ["y"], {"dims": [2, 64]})])
    graph = _check(build, fold_reshape_pairs, ["Reshape", "Activation", "Reshape", "Activation", "Reshape",
                                               "Eltwise", "Reshape"], ["Activation", "Activation", "Eltwise", "Reshape"])
    assert graph.shape("y") == (2, 64) and get_arg(graph.net.op[-1], "dims") == [2, 64]


def test_fold_reshape_pairs_keeps_shared_and_returned_tensors():
    from mace.transform.passes.fold_reshape_pairs import fold_reshape_pairs

    graph = graph_of({"x": X.shape}, [
        ("Reshape", ["x"], ["r1"], {"dims": [1, 16, 8]}),
        ("Activation", ["r1"], ["a"], {"activation": "RELU"}),
        ("Activation", ["r1"], ["b"], {"activation": "TANH"})], outputs=["a", "b"])
    assert not fold_reshape_pairs(graph, {})
    graph = graph_of({"x": X.shape}, [("Reshape", ["x"], ["r1"], {"dims": [1, 16, 8]}),
                                      ("Activation", ["r1"], ["a"], {"activation": "RELU"})], outputs=["r1", "a"])
    assert not fold_reshape_pairs(graph, {})


@pytest.mark.parametrize("k,pads,folds", [(1, [0, 0, 0, 0], True), (3, [0, 0, 0, 0], True), (3, [1, 1, 1, 1], False)])
def test_fold_affine_into_conv(k, pads, folds):
    """x * s + t (PP-OCR's affine after its hardswish) folds into the unpadded conv reading it;
    a padded conv keeps it (its border would read t where the zero padding is)."""
    from mace.transform.passes.fold_affine_into_conv import fold_affine_into_conv

    consts = {"s": RNG.uniform(0.5, 2, 8).astype(np.float32), "t": np.float32([0.3]),
              "w": RNG.normal(size=(6, 8, k, k)).astype(np.float32), "b": RNG.normal(size=6).astype(np.float32)}
    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("Eltwise", ["s", "x"], ["m"], {"type": "PROD"}),
        ("Eltwise", ["m", "t"], ["a"], {"type": "SUM"}),
        ("Conv2D", ["a", "w", "b"], ["y"], {"strides": [1, 1], "pads": pads, "data_format": "NHWC"})], consts)
    after = ["Conv2D"] if folds else ["Eltwise", "Eltwise", "Conv2D"]
    _check(build, fold_affine_into_conv, ["Eltwise", "Eltwise", "Conv2D"], after, rtol=1e-4, changes=folds)


XP = RNG.normal(size=(1, 9, 10, 8)).astype(np.float32)
PAD_CONSTS = {"w": RNG.normal(size=(6, 8, 3, 3)).astype(np.float32), "d": RNG.normal(size=(8, 1, 3, 3)).astype(np.float32)}


def _pad_then_convs(pad_args, conv_pads=None, fmt="NHWC", extra=None, outputs=None):
    """x -> Pad -> a stride-2 3x3 Conv2D and a DepthwiseConv2d (VALID, or `conv_pads`)."""
    conv = {"strides": [2, 2], "data_format": fmt} | ({"pads": conv_pads} if conv_pads else {"padding": "VALID"})
    ops = [("Pad", ["x"], ["p"], {"paddings": [0, 0, 0, 0, 0, 0, 0, 0]} | pad_args),
           ("Conv2D", ["p", "w"], ["y"], conv),
           ("DepthwiseConv2d", ["p", "d"], ["z"], dict(conv, group=8))] + (extra or [])
    shape = XP.shape if fmt == "NHWC" else XP.transpose(0, 3, 1, 2).shape
    return graph_of({"x": shape}, ops, PAD_CONSTS, outputs=outputs or ["y", "z"])


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("conv_pads", [None, [1, 0, 0, 2]])
def test_fold_pad_into_conv(fmt, conv_pads):
    """A zero Pad of the spatial axes (asymmetric: top 0 / bottom 1, left 1 / right 2) feeding only
    convs becomes their explicit pads, added to their own; outputs unchanged."""
    from mace.transform.passes.fold_pad_into_conv import fold_pad_into_conv

    h, w = (1, 2) if fmt == "NHWC" else (2, 3)
    amounts = [0] * 8
    amounts[h], amounts[4 + h], amounts[w], amounts[4 + w] = 0, 1, 1, 2
    build = lambda: _pad_then_convs({"paddings": amounts}, conv_pads, fmt)  # noqa: E731
    if fmt == "NHWC":
        graph = _check(build, fold_pad_into_conv, ["Pad", "Conv2D", "DepthwiseConv2d"], ["Conv2D", "DepthwiseConv2d"],
                       x=XP)
    else:   # the CPU engine runs NHWC only (after to_nhwc): the rewrite and the shapes
        graph, original = build(), build()
        assert fold_pad_into_conv(graph, {}) and _types(graph) == ["Conv2D", "DepthwiseConv2d"]
        assert all(graph.shape(t) == original.shape(t) for t in ("y", "z"))
    own = conv_pads or [0, 0, 0, 0]
    for op in graph.net.op:
        assert list(get_arg(op, "pads")) == [own[0], own[1] + 1, own[2] + 1, own[3] + 2]
        assert op.input[0] == "x" and not get_arg(op, "padding", "")


@pytest.mark.parametrize("pad_args, extra, outputs", [
    ({"constant_value": 1.0}, None, None),                     # a fill that is not the conv's zero
    ({"pad_type": "REFLECT"}, None, None),
    ("batch", None, None),                                     # an axis that is not spatial
    ("negative", None, None),                                  # a crop
    ({}, [("Activation", ["p"], ["r"], {"activation": "RELU"})], ["y", "z", "r"]),   # read by another op
    ({}, None, ["y", "z", "p"]),                                # a model output
])
def test_fold_pad_into_conv_leaves(pad_args, extra, outputs):
    from mace.transform.passes.fold_pad_into_conv import fold_pad_into_conv

    amounts = [0, 1, 1, 0, 0, 1, 1, 0]
    if pad_args == "batch":
        pad_args, amounts = {}, [1, 1, 1, 0, 0, 1, 1, 0]
    elif pad_args == "negative":
        pad_args, amounts = {}, [0, -1, 1, 0, 0, 1, 1, 0]
    graph = _pad_then_convs(dict(pad_args, paddings=amounts), extra=extra, outputs=outputs)
    assert not fold_pad_into_conv(graph, {})


def test_fold_pad_into_conv_leaves_a_same_padded_conv():
    from mace.transform.passes.fold_pad_into_conv import fold_pad_into_conv

    graph = _pad_then_convs({"paddings": [0, 1, 1, 0, 0, 1, 1, 0]})
    for op in graph.net.op[1:]:
        set_arg(op, "padding", "SAME")
    assert not fold_pad_into_conv(graph, {})


MMI_CONSTS = {"B": RNG.integers(-128, 128, size=(8, 5)).astype(np.int8), "ws": np.float32(0.01),
              "bias": RNG.normal(size=5).astype(np.float32)}


@pytest.mark.parametrize("options, fused", [({}, True), ({"runtime": "gpu"}, False), ({"quantize": True}, False)])
def test_fuse_matmul_integer_to_float(options, fused):
    """quantize_dynamic's MatMulInteger -> Cast -> Mul(scale) -> Add(bias) is one scaled
    MatMulInteger on CPU float models (the same float32 roundings: equal outputs); the GPU and
    int8 paths keep the chain. (Byte equality on the fast kernels and onnxruntime's values:
    tests/ops/test_fast_matmul_integer.py.)"""
    from mace.transform.passes.fuse_matmul_integer_to_float import fuse_matmul_integer_to_float

    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("DynamicQuantize", ["x"], ["q", "s", "z"], {}),
        ("Eltwise", ["s", "ws"], ["scale"], {"type": "PROD"}),
        ("MatMulInteger", ["q", "B", "z"], ["acc"], {"has_a_zero": 1}),
        ("Cast", ["acc"], ["accf"], {"to": "float32"}),
        ("Eltwise", ["accf", "scale"], ["m"], {"type": "PROD"}),
        ("Eltwise", ["bias", "m"], ["y"], {"type": "SUM"})], MMI_CONSTS)
    before = ["DynamicQuantize", "Eltwise", "MatMulInteger", "Cast", "Eltwise", "Eltwise"]
    after = ["DynamicQuantize", "Eltwise", "MatMulInteger"] if fused else before
    graph = _check(build, fuse_matmul_integer_to_float, before, after, options=options, rtol=0, changes=fused)
    mmi = graph.net.op[2]
    assert bool(get_arg(mmi, "scaled", 0)) == fused and list(mmi.output) == (["y"] if fused else ["acc"])


@pytest.mark.parametrize("options, fused", [({}, True), ({"runtime": "gpu"}, False)])
def test_fuse_skip_layer_norm(options, fused):
    """LayerNorm(a + b) reads the residual as its `skip` input (CPU float models only); the fast
    kernel then adds them per row."""
    from mace.transform.passes.fuse_skip_layer_norm import fuse_skip_layer_norm

    x = RNG.normal(size=(1, 6, 16)).astype(np.float32)
    consts = {"r": RNG.normal(size=(1, 6, 16)).astype(np.float32), "gamma": RNG.uniform(0.5, 1.5, 16).astype(np.float32),
              "beta": RNG.normal(size=16).astype(np.float32)}
    build = lambda: graph_of({"x": x.shape}, [  # noqa: E731
        ("Activation", ["x"], ["h"], {"activation": "TANH"}),
        ("Eltwise", ["h", "x"], ["s"], {"type": "SUM"}),
        ("LayerNorm", ["s", "gamma", "beta"], ["y"], {"axis": -1, "epsilon": 1e-5})], consts)
    after = ["Activation", "LayerNorm"] if fused else ["Activation", "Eltwise", "LayerNorm"]
    graph = _check(build, fuse_skip_layer_norm, ["Activation", "Eltwise", "LayerNorm"], after, options=options,
                   x=x, rtol=1e-4, changes=fused)
    if fused:
        assert get_arg(graph.net.op[-1], "skip") == 1 and list(graph.net.op[-1].input)[-1] == "x"
        fast = Engine(graph).run({"x": x})["y"]
        np.testing.assert_allclose(fast, _outputs(graph, x)["y"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("options, fused", [({}, True), ({"runtime": "gpu"}, False)])
def test_fuse_activation_takes_a_prelu_slope_per_channel(options, fused):
    """A PRELU with a slope per output channel fuses into the conv before it (CPU float): the
    slope becomes the conv's input 3 (after a zero bias here); the store step applies it."""
    from mace.transform.passes.fuse_activation import fuse_activation

    w = RNG.normal(size=(6, 8, 3, 3)).astype(np.float32)
    slope = RNG.uniform(-1, 1, (1, 1, 6)).astype(np.float32)
    build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("Conv2D", ["x", "w"], ["c"], {"strides": [1, 1], "pads": [1, 1, 1, 1], "data_format": "NHWC"}),
        ("Activation", ["c", "slope"], ["y"], {"activation": "PRELU"})], {"w": w, "slope": slope})
    after = ["Conv2D"] if fused else ["Conv2D", "Activation"]
    graph = _check(build, fuse_activation, ["Conv2D", "Activation"], after, options=options, changes=fused,
                   rtol=1e-4)
    if fused:
        conv = graph.net.op[0]
        assert get_arg(conv, "activation") == "PRELU" and len(conv.input) == 4
        np.testing.assert_array_equal(graph.consts[conv.input[3]], slope.reshape(-1))
        fast = Engine(graph).run({"x": X})["y"]
        np.testing.assert_allclose(fast, _outputs(graph)["y"], rtol=1e-4, atol=1e-5)


def test_remove_identity_drops_a_cast_to_the_same_type():
    build = lambda: graph_of({"x": X.shape}, [("Cast", ["x"], ["c"], {"to": "float32"}),  # noqa: E731
                                             ("Cast", ["c"], ["h"], {"to": "float16"}),
                                             ("Activation", ["h"], ["y"], {"activation": "RELU"})])
    _check(build, remove_identity, ["Cast", "Cast", "Activation"], ["Cast", "Activation"], rtol=1e-3)


def _round_trip(kind, to_int, back):
    """x -> Eltwise kind -> Cast to_int -> Cast back -> Relu."""
    return lambda: graph_of({"x": X.shape}, [  # noqa: E731
        ("Eltwise", ["x"], ["r"], {"type": kind}),
        ("Cast", ["r"], ["i"], {"to": to_int}),
        ("Cast", ["i"], ["f"], {"to": back}),
        ("Activation", ["f"], ["y"], {"activation": "RELU"})])


@pytest.mark.parametrize("kind, to_int", [("ROUND", "int32"), ("FLOOR", "int64"), ("CEIL", "int32")])
def test_skip_integral_casts(kind, to_int):
    x = X * 1000   # rounding matters; all within int32
    graph = _check(_round_trip(kind, to_int, "float32"), skip_integral_casts,
                   ["Eltwise", "Cast", "Cast", "Activation"], ["Eltwise", "Cast", "Cast", "Activation"], x=x)
    assert graph.net.op[2].input[0] == "r"   # the Cast back reads the rounded float
    remove_identity(graph, {})
    remove_dead_ops(graph, {})
    assert _types(graph) == ["Eltwise", "Activation"]
    np.testing.assert_array_equal(_outputs(graph, x)["y"], _outputs(_round_trip(kind, to_int, "float32")(), x)["y"])


@pytest.mark.parametrize("case", ["not rounded", "back to float16", "to a narrow int"])
def test_skip_integral_casts_leaves_other_pairs(case):
    if case == "not rounded":   # a truncation: the pair is not the identity
        build = lambda: graph_of({"x": X.shape}, [  # noqa: E731
            ("Cast", ["x"], ["i"], {"to": "int32"}), ("Cast", ["i"], ["f"], {"to": "float32"}),
            ("Activation", ["f"], ["y"], {"activation": "RELU"})])
        before = ["Cast", "Cast", "Activation"]
    else:
        build = _round_trip("ROUND", "int8" if case == "to a narrow int" else "int32",
                            "float16" if case == "back to float16" else "float32")
        before = ["Eltwise", "Cast", "Cast", "Activation"]
    _check(build, skip_integral_casts, before, before, x=X * 1000, changes=False, rtol=1e-3)


def _stream(slice_at=(2, 5), other_reader=False, slice_output=False, second_read=False):
    """x [1, 2, 1, 8] appended to a variable's 3 frames (axis 1), the last 3 of the 5 assigned
    back, a Relu reading the 5: TensorFlow's streaming layer as TFLite files hold it."""
    init = np.random.default_rng(5).normal(size=(1, 3, 1, 8)).astype(np.float32)
    ops = [("ReadVariable", [], ["r"], {"variable": "v", "shape": [1, 3, 1, 8], "dtype": "float32"}),
           ("Concat", ["r", "x"], ["c"], {"axis": 1}),
           ("StridedSlice", ["c"], ["s"], {"starts": [slice_at[0]], "ends": [slice_at[1]], "axes": [1], "steps": [1]}),
           ("AssignVariable", ["s", "init", "r"], [], {"variable": "v"}),
           ("Activation", ["c"], ["y"], {"activation": "RELU"})]
    outputs = ["y"]
    if other_reader:
        ops.append(("Activation", ["r"], ["z"], {"activation": "TANH"}))
        outputs.append("z")
    if slice_output:
        outputs.append("s")
    if second_read:
        ops.append(("ReadVariable", [], ["r2"], {"variable": "v", "shape": [1, 3, 1, 8], "dtype": "float32"}))
        ops.append(("Activation", ["r2"], ["z"], {"activation": "TANH"}))
        outputs.append("z")
    return graph_of({"x": (1, 2, 1, 8)}, ops, {"init": init}, outputs=outputs)


def _stream_runs(graph, options=None) -> list:
    engine = Engine(graph, options=options or {"reference_kernels": True})
    rng = np.random.default_rng(6)
    return [engine.run({"x": rng.normal(size=(1, 2, 1, 8)).astype(np.float32)}) for _ in range(4)]


def test_fuse_stream_buffer():
    """The four ops are one StreamBuffer; over four runs (the state carried) its outputs are the
    four ops', with the reference and the fast kernel."""
    from mace.transform.passes.fuse_stream_buffer import fuse_stream_buffer

    original, graph = _stream(), _stream()
    assert fuse_stream_buffer(graph, {}) and _types(graph) == ["StreamBuffer", "Activation"]
    assert fuse_stream_buffer(_stream(slice_at=(-3, 5)), {})   # counted from the end: the same 3
    (op,) = [op for op in graph.net.op if op.type == "StreamBuffer"]
    assert list(op.input) == ["x", "init"] and get_arg(op, "variable") == "v" and get_arg(op, "axis") == 1
    want = _stream_runs(original)
    for options in ({"reference_kernels": True}, {}):
        got = _stream_runs(graph, options)
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g["y"], w["y"], err_msg=f"run {k} {options}")
    assert not np.array_equal(want[0]["y"][:, :3], want[1]["y"][:, :3])   # the state moved


@pytest.mark.parametrize("case", [dict(slice_at=(1, 4)), dict(other_reader=True), dict(slice_output=True),
                                  dict(second_read=True), "gpu"])
def test_fuse_stream_buffer_leaves(case):
    """Not the last K frames, the read value or the slice read elsewhere, the variable read
    twice, a GPU model: the four ops stay."""
    from mace.transform.passes.fuse_stream_buffer import fuse_stream_buffer

    graph = _stream(**(case if isinstance(case, dict) else {}))
    assert not fuse_stream_buffer(graph, {"runtime": "gpu"} if case == "gpu" else {})
    assert "StreamBuffer" not in _types(graph)


@pytest.mark.parametrize("axis, state, x", [(1, (2, 3, 4), (2, 2, 4)), (2, (2, 3, 4, 5), (2, 3, 1, 5)),
                                            (0, (3, 4), (1, 4))])
def test_stream_buffer_op_fast_and_reference(axis, state, x):
    """StreamBuffer itself on other axes and leading rows (the fast loop's rows > 1): the fast
    kernel's bytes are the reference's over five runs, and each run is concat then the last K."""
    rng = np.random.default_rng(7)
    init = rng.normal(size=state).astype(np.float32)

    def build():
        return graph_of({"x": x}, [("StreamBuffer", ["x", "init"], ["y"], {"axis": axis, "variable": "v"})],
                        {"init": init})

    feeds = [rng.normal(size=x).astype(np.float32) for _ in range(5)]
    fast, ref = Engine(build()), Engine(build(), options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast" and ref.nodes[0].tag == "cpu"
    kept = init
    for feed in feeds:
        want = np.concatenate([kept, feed], axis=axis)
        got_fast, got_ref = fast.run({"x": feed})["y"], ref.run({"x": feed})["y"]
        np.testing.assert_array_equal(got_ref, want)
        np.testing.assert_array_equal(got_fast, want)
        kept = np.take(want, range(want.shape[axis] - state[axis], want.shape[axis]), axis=axis)


def test_stream_buffer_with_a_run_time_initial_value_is_refused_by_name():
    from mace.errors import MaceError

    graph = graph_of({"x": (1, 2), "init": (1, 3)},
                     [("StreamBuffer", ["x", "init"], ["y"], {"axis": 1, "variable": "v"})])
    graph.net.op[0].name = "buf"
    with pytest.raises(MaceError, match="buf.*initial value must be a constant"):
        Engine(graph)
