"""The fast Pad, StridedSlice, Split and Resize kernels (mace/ops/fast/pad.py, strided_slice.py,
split.py, resize.py) against their numpy references: the same bytes, over NaN / inf, empty
tensors, negative steps, crops and every pad mode."""
import numpy as np
import pytest

from mace.frontends.base import add_input_info, add_output_info
from mace.config.specs import TensorSpec
from mace.ir.graph import Graph
from mace.ops.fast._jit import loops
from mace.runtime.engine import Engine
from mace.transform.shape_inference import infer_shapes

RNG = np.random.default_rng(33)


def sample(shape, dtype=np.float32):
    x = RNG.standard_normal(shape).astype(dtype)
    if x.size >= 4 and x.dtype.kind == "f":
        x.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return x


def both(op_type, x, args, outputs=("y",), fast_expected=True):
    graph = Graph()
    add_input_info(graph, TensorSpec("x", x.shape, "NONE", dtype=str(x.dtype)))
    graph.add_op(op_type, ["x"], list(outputs), data_format="NHWC", **args)
    for name in outputs:
        add_output_info(graph, TensorSpec(name, None, "NONE"))
    infer_shapes(graph)
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert (fast.nodes[0].tag == "cpu:fast") == fast_expected, (op_type, args, fast.nodes[0].tag)
    assert ref.nodes[0].tag == "cpu"
    got, want = fast.run({"x": x}), ref.run({"x": x})
    again = fast.run({"x": x})
    for name in outputs:
        assert got[name].shape == want[name].shape
        assert got[name].tobytes() == want[name].tobytes(), (op_type, args, name)
        assert again[name].tobytes() == want[name].tobytes()


@pytest.mark.parametrize("mode", ["CONSTANT", "REFLECT", "SYMMETRIC", "EDGE", "WRAP"])
@pytest.mark.parametrize("shape,paddings", [
    ((1, 7, 6, 5), [0, 1, 2, 0, 0, 2, 1, 0]),        # NHWC spatial, asymmetric
    ((1, 6, 6, 24), [0, 0, 0, 0, 0, 0, 0, 4]),       # channels (MediaPipe's residual pads)
    ((1, 1, 300), [0, 0, 128, 0, 0, 128]),          # audio: basic_pitch's reflect
    ((2, 4, 3), [1, 2, 3, 1, 2, 3]),                # every axis, wide as the axis allows
    ((2, 5, 4), [0, -1, 2, 0, 1, -2]),              # negative amounts crop first
])
def test_pad_matches_reference(mode, shape, paddings):
    x = sample(shape)
    r = len(shape)
    kept = [d - max(-b, 0) - max(-e, 0) for d, b, e in zip(shape, paddings[:r], paddings[r:])]
    wide = mode == "REFLECT" and any(max(p, 0) > k - 1 for p, k in zip(paddings, kept * 2))
    both("Pad", x, dict(paddings=paddings, pad_type=mode, constant_value=1.5), fast_expected=not wide)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,paddings", [
    ((1, 64, 64, 24), [0, 0, 0, 0, 0, 0, 0, 4]),     # mp_face_detection's largest: split across threads
    ((3, 5, 7), [0, 0, 2, 0, 0, 3]),                # both ends of the last axis
    ((4, 0), [0, 2, 0, 1]),                         # nothing to copy, only the fill
    ((2, 3), [0, 0, 0, 0]),                         # no padding at all: a copy
])
def test_pad_of_the_last_axis_runs_the_compiled_rows(shape, paddings, threads):
    """A float32 CONSTANT pad of the last axis alone: one compiled pass per row (_pad_loops),
    the reference's bytes (NaN, inf, -0.0 copied; the fill value as float32)."""
    x = sample(shape)
    graph = Graph()
    add_input_info(graph, TensorSpec("x", x.shape, "NONE", dtype="float32"))
    graph.add_op("Pad", ["x"], ["y"], data_format="NHWC", paddings=paddings, pad_type="CONSTANT",
                 constant_value=0.1)
    add_output_info(graph, TensorSpec("y", None, "NONE"))
    infer_shapes(graph)
    fast = Engine(graph, options={"num_threads": threads})
    ref = Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast" and fast.nodes[0].kernel.last_axis_only
    for _ in range(2):   # the second run over the first's output buffer
        assert fast.run({"x": x})["y"].tobytes() == ref.run({"x": x})["y"].tobytes()


def test_pad_declines_mirrors_wider_than_one_reflection_and_runs_ints_and_empties():
    both("Pad", sample((1, 3, 4)), dict(paddings=[0, 0, 4, 0, 0, 0], pad_type="REFLECT"), fast_expected=False)
    both("Pad", sample((1, 3, 4)), dict(paddings=[0, 0, 5, 0, 0, 0], pad_type="WRAP"), fast_expected=False)
    both("Pad", np.arange(24, dtype=np.int32).reshape(2, 3, 4), dict(paddings=[0, 1, 1, 0, 1, 1],
                                                                      constant_value=2.7))
    both("Pad", sample((1, 0, 4)), dict(paddings=[0, 2, 1, 0, 1, 1], constant_value=-1.0))


@pytest.mark.parametrize("args", [
    dict(starts=[0, -309, 0, 0], ends=[1, 324, 172, 2], axes=[0, 2, 1, 3], steps=[1, 1, 1, 1]),
    dict(starts=[-1], ends=[-100], axes=[2], steps=[-1]),          # reversed
    dict(starts=[5, 1], ends=[0, 9], axes=[1, 3], steps=[-2, 3]),  # negative and wide steps
    dict(starts=[4], ends=[2], axes=[1], steps=[1]),               # empty
])
def test_strided_slice_matches_reference(args):
    both("StridedSlice", sample((2, 8, 12, 10)), args)


@pytest.mark.parametrize("shape,axis,split", [
    ((1, 10, 10, 32), 3, [16, 16]), ((1, 82, 21), 1, [64, 18]), ((3, 4, 5), -1, [0, 2, 3]),
    ((0, 4, 6), 2, [3, 3]),
])
def test_split_matches_reference(shape, axis, split):
    outputs = tuple(f"y{i}" for i in range(len(split)))
    both("Split", sample(shape), dict(axis=axis, split=split), outputs=outputs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int64, np.bool_])
def test_small_split_and_slice_copies_are_compiled_and_keep_the_bytes(dtype):
    """A small Split's channel pieces and a StridedSlice (negative and wide steps: any strides)
    copy through the compiled row loop (a step a chain calls), raw bits: NaN payloads and -0.0
    kept, any dtype; a copy numpy would have to reshape by copying, or a large one, stays
    np.copyto. Bytes equal to the reference's in every case."""
    from mace.ops.fast._base import SMALL_COPY, copy_step

    x = (RNG.standard_normal((1, 9, 1, 64)) * 50).astype(dtype)
    if np.dtype(dtype).kind == "f":
        bits = x.view(np.uint16 if dtype == np.float16 else np.uint32)
        bits[0, 0, 0, :2] = [0x7E01, 0xFE02] if dtype == np.float16 else [0x7FC00001, 0xFFC00002]
        x[0, 1, 0, :2] = [-0.0, np.inf]
    outputs = ("y0", "y1")
    both("Split", x, dict(axis=3, split=[32, 32]), outputs=outputs)
    both("StridedSlice", x, dict(starts=[8, 1], ends=[2, 60], axes=[1, 3], steps=[-2, 3]))
    engine = Engine(_graph({"x": x}, "Split", ["x"], dict(axis=3, split=[32, 32]), outputs=outputs))
    if loops() is not None:
        assert all("copy_rows" in repr(s.func) for s in engine._steps[0].parts)
    swapped = np.zeros((3, 4, 5), np.float32).transpose(1, 0, 2)   # its rows are not one axis
    assert copy_step(np.zeros((4, 3, 5), np.float32), swapped).func is np.copyto
    big = np.zeros(SMALL_COPY + 1, np.float32)
    assert copy_step(big.copy(), big).func is np.copyto


RESIZES = [((1, 10, 10, 24), (80, 80), "asymmetric"), ((2, 7, 7, 5), (14, 14), "half_pixel"),
           ((1, 9, 6, 3), (4, 13), "align_corners"), ((1, 5, 4, 1), (5, 9), "pytorch_half_pixel")]


@pytest.mark.skipif(loops() is None, reason="numba is not installed")
@pytest.mark.parametrize("shape,size,mode", RESIZES)
@pytest.mark.parametrize("op_type", ["ResizeNearestNeighbor", "ResizeBilinear"])
def test_resize_matches_reference(op_type, shape, size, mode):
    scale = [size[0] / shape[1], size[1] / shape[2]]
    extra = dict(nearest_mode="floor") if op_type == "ResizeNearestNeighbor" else {}
    both(op_type, sample(shape), dict(size=list(size), scale=scale, coordinate_transformation_mode=mode,
                                      **extra))


@pytest.mark.parametrize("shape,dims", [
    ((1, 172, 30, 2), [0, 2, 1, 3]), ((1, 17, 36), [0, 2, 1]), ((1, 16, 12, 32), [0, 2, 1, 3]),
    ((12, 16, 32), [0, 2, 1]), ((1, 40, 3, 8, 15), [2, 0, 3, 1, 4]), ((1, 1, 9, 25), [0, 3, 1, 2]),
    ((5,), [0]), ((2, 0, 3), [2, 1, 0]), ((3, 4, 2), []),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_transpose_any_permutation_matches_reference(shape, dims, dtype):
    both("Transpose", sample(shape, dtype) if dtype == np.float32 else
         RNG.integers(0, 100, shape).astype(dtype), dict(dims=dims))


def _graph(inputs: dict, op_type, names, args, consts=None, outputs=("y",)):
    graph = Graph()
    for name, x in inputs.items():
        add_input_info(graph, TensorSpec(name, x.shape, "NONE", dtype=str(x.dtype)))
    for name, value in (consts or {}).items():
        graph.add_const(name, value)
    graph.add_op(op_type, names, list(outputs), **args)
    for name in outputs:
        add_output_info(graph, TensorSpec(name, None, "NONE"))
    infer_shapes(graph)
    return graph


def both_graph(graph, feed, fast_expected=True):
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert (fast.nodes[0].tag == "cpu:fast") == fast_expected, fast.nodes[0].tag
    got, want = fast.run(feed), ref.run(feed)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].tobytes() == value.tobytes(), name


@pytest.mark.parametrize("cond_shape,x_shape,y_shape", [
    ((1, 1, 1), (), (1, 6, 7)), ((1, 2, 6, 6), (), (1, 2, 6, 6)), ((), (1, 3), (1, 3)), ((4, 1), (1, 5), (4, 5)),
    ((0, 3), (), (1, 3)),
])
def test_select_matches_reference(cond_shape, x_shape, y_shape):
    cond = RNG.random(cond_shape) < 0.5
    x, y = sample(x_shape), sample(y_shape)
    both_graph(_graph({"c": cond, "x": x, "y": y}, "Select", ["c", "x", "y"], {}, outputs=("o",)),
               {"c": cond, "x": x, "y": y})
    both_graph(_graph({"y": y}, "Select", ["c", "x", "y"], {}, {"c": cond, "x": x}, outputs=("o",)), {"y": y})
    fcond = cond.astype(np.float32)   # a float condition: the reference casts it each run
    both_graph(_graph({"c": fcond, "x": x, "y": y}, "Select", ["c", "x", "y"], {}, outputs=("o",)),
               {"c": fcond, "x": x, "y": y}, fast_expected=False)


@pytest.mark.parametrize("shape,axis,indices", [
    ((1, 720, 2), 1, np.arange(600).reshape(60, 10) - 100), ((300, 8), 0, np.array([[3, -1, 7, 0]])),
    ((2, 5, 3), 2, np.array(1)), ((4, 6), 1, np.zeros((0,), np.int64)),
])
def test_gather_matches_reference(shape, axis, indices):
    x = sample(shape)
    both_graph(_graph({"x": x}, "Gather", ["x", "i"], dict(axis=axis), {"i": indices}), {"x": x})
    idx = np.asarray(indices, np.int64)
    both_graph(_graph({"x": x, "i": idx}, "Gather", ["x", "i"], dict(axis=axis)), {"x": x, "i": idx})


def test_gather_out_of_range_runtime_indices_are_refused():
    x, idx = sample((4, 3)), np.array([0, 4])
    engine = Engine(_graph({"x": x, "i": idx}, "Gather", ["x", "i"], dict(axis=0)))
    assert engine.nodes[0].tag == "cpu:fast"
    with pytest.raises(Exception, match="out of range"):
        engine.run({"x": x, "i": idx})


@pytest.mark.parametrize("src,to", [(np.float32, "int32"), (np.float32, "bool"), (np.int64, "float32"),
                                    (np.float32, "float16"), (np.int32, "int8"), (np.int8, "float32"),
                                    (np.uint8, "float32"), (np.int32, "float32"), (np.bool_, "float32"),
                                    (np.bool_, "int32"), (np.float32, "float32")])
def test_cast_matches_reference(src, to):
    """The fast Cast's bytes are the reference's (numpy's); a conversion to a float or from a
    bool between contiguous tensors is the compiled loop (a step a chain can call)."""
    x = (RNG.standard_normal((3, 17)) * 1000).astype(src)
    if np.dtype(src).kind == "f":
        x[0, :6] = [np.inf, -0.0, 65519.0, np.nan, 1e-45, -np.inf]
    if np.dtype(src) == np.int32:   # above 2**24: float32 rounds to nearest even
        x[1, :4] = [2**24 + 1, 2**24 + 3, -(2**31), 2**31 - 1]
    if np.dtype(src) == np.int64:
        x[1, :3] = [2**53 + 1, -(2**63), 2**63 - 1]
    both("Cast", x, dict(to=to))
    engine = Engine(_graph({"x": x}, "Cast", ["x"], dict(to=to)))
    compiled = "cast_flat" in repr(getattr(engine._steps[0], "func", None))
    assert compiled == (loops() is not None and (to in ("float32",) or src is np.bool_)), (src, to)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_matches_reference(mode):
    both("DepthToSpace", sample((1, 7, 5, 36)), dict(block_size=3, mode=mode))


@pytest.mark.parametrize("kind", ["SUM", "MEAN", "MAX", "MIN", "PROD"])
@pytest.mark.parametrize("shape,axis,keepdims", [
    ((1, 30, 17, 2), [3], 0), ((4, 7), [-1], 1), ((3, 5, 6), [2], 0), ((2, 9, 12), [2], 1),
    ((1, 17, 30), [1, 2], 0), ((2, 3, 4, 5), [0, 2], 1), ((6, 1), [1], 0),
])
def test_reduce_matches_reference(kind, shape, axis, keepdims):
    x = sample(shape)
    edges = [-0.0, -0.0, -0.0, 0.0, 1e30, 1e30][:x.size - 4]   # signed zeros of a pair, overflow
    x.ravel()[4:4 + len(edges)] = edges
    with np.errstate(all="ignore"):
        both("Reduce", x, dict(reduce_type=kind, axis=axis, keepdims=keepdims))


def test_reduce_declines_empty_axes_and_other_kinds():
    both("Reduce", sample((2, 0, 3)), dict(reduce_type="SUM", axis=[1], keepdims=1), fast_expected=False)
    both("Reduce", sample((2, 4, 3)), dict(reduce_type="L2", axis=[1], keepdims=1), fast_expected=False)


@pytest.mark.parametrize("args", [dict(activation="RELU"), dict(activation="RELUX", max_limit=6.0),
                                  dict(activation="CLIP", activation_coefficient=1e-9, max_limit=3.4e38),
                                  dict(activation="TANH")])
def test_numpy_activations_are_the_reference_bytes(args):
    """RELU / RELUX / CLIP / TANH: numpy's own call from x into the output (fast/activation.py)."""
    both("Activation", sample((3, 129)), args)
    both("Activation", sample((0, 4)), args)


def test_small_onnx_model_of_these_ops_matches_onnxruntime_on_fast_kernels():
    """End to end: an ONNX graph whose Pad (reflect and constant), Slice, Split, Resize (nearest
    and linear), Transpose, Where, Gather, ReduceSum, broadcast Mul / Sub, Relu and Cast all
    bind the cpu:fast kernels, against onnxruntime."""
    pytest.importorskip("onnxruntime")
    from onnx import helper
    from tests.ops.onnx_graph import check_model, graph_model
    i64 = lambda *v: np.array(v, np.int64)   # noqa: E731
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="reflect"),
        helper.make_node("Pad", ["p", "pads2", "zero"], ["p2"], mode="constant"),
        helper.make_node("Resize", ["p2", "", "scales"], ["r"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Resize", ["r", "", "scales"], ["rl"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
        helper.make_node("Slice", ["rl", "starts", "ends", "axes", "steps"], ["s"]),
        helper.make_node("Split", ["s", "halves"], ["a", "b"], axis=1),
        helper.make_node("ReduceMean", ["a"], ["m"], axes=[2, 3], keepdims=1),
        helper.make_node("Mul", ["b", "m"], ["bm"]),
        helper.make_node("Transpose", ["bm"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("ReduceSum", ["t", "last"], ["rs"], keepdims=0),
        helper.make_node("Greater", ["rs", "zero"], ["g"]),
        helper.make_node("Where", ["g", "rs", "neg"], ["w"]),
        helper.make_node("Gather", ["w", "idx"], ["ga"], axis=1),
        helper.make_node("Sub", ["ga", "m1"], ["d"]),
        helper.make_node("Relu", ["d"], ["re"]),
        helper.make_node("Cast", ["re"], ["y"], to=7),
    ]
    consts = {"pads": i64(0, 0, 1, 2, 0, 0, 2, 1), "pads2": i64(0, 0, 1, 0, 0, 0, 0, 1),
              "zero": np.float32(0.0), "scales": np.float32([1, 1, 2, 2]),
              "starts": i64(-2, 1), "ends": i64(-100, 30), "axes": i64(2, 3), "steps": i64(-1, 2),
              "halves": i64(2, 2), "last": i64(3), "neg": np.float32(-1.5),
              "idx": i64([[0, 3], [5, 2]]), "m1": np.float32([[0.25], [-0.5]])}
    x = RNG.standard_normal((1, 4, 6, 7)).astype(np.float32)
    model = graph_model(nodes, {"x": x}, {"y": np.int64, "w": np.float32, "rl": np.float32}, consts, opset=17)
    _, engine = check_model(model, {"x": x})
    on_reference = sorted({n.op.type for n in engine.nodes if n.tag == "cpu"})
    assert not on_reference, on_reference


@pytest.mark.skipif(loops() is None, reason="numba is not installed")
@pytest.mark.parametrize("op_type", ["ResizeNearestNeighbor", "ResizeBilinear"])
def test_resize_split_across_the_compute_pool_matches_reference(op_type, monkeypatch):
    """The resize loops' _par twins, split by output rows over the pool's two threads."""
    from threadpoolctl import threadpool_limits
    from mace.ops.fast import _pool
    if _pool.process_pool() is None:
        pytest.skip("no compute pool here")
    monkeypatch.setattr(_pool, "MIN_PARALLEL_WORK", 0)
    with threadpool_limits(2):
        extra = dict(nearest_mode="round_prefer_floor") if op_type == "ResizeNearestNeighbor" else {}
        both(op_type, sample((2, 5, 7, 6)), dict(size=[13, 9], scale=[13 / 5, 9 / 7],
                                                 coordinate_transformation_mode="half_pixel", **extra))


@pytest.mark.skipif(loops() is None, reason="numba is not installed")
@pytest.mark.parametrize("act", ["LEAKYRELU", "HARDSWISH"])
def test_batchnorm_with_a_compiled_activation_is_the_reference_bytes(act):
    """openWakeWord's BN + LEAKYRELU: the affine loop (fastmath: a fused multiply-add, as the
    clip-only BN already is), then the activation's exact loop in place."""
    x = sample((1, 7, 5, 24))
    scale, offset = RNG.uniform(0.5, 1.5, 24).astype(np.float32), RNG.standard_normal(24).astype(np.float32)
    graph = _graph({"x": x}, "BatchNorm", ["x", "s", "o"], dict(activation=act, activation_coefficient=0.2,
                                                               data_format="NHWC"), {"s": scale, "o": offset})
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast"
    with np.errstate(all="ignore"):
        got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(loops() is None, reason="numba is not installed")
@pytest.mark.parametrize("shape,axis", [((1, 16, 4, 21), 1), ((2, 5, 3), 0), ((3, 7, 6), -2), ((4, 9), 1)])
@pytest.mark.parametrize("log", [0, 1])
def test_softmax_along_any_axis_matches_reference(shape, axis, log):
    """Along a middle axis (YOLOv8's DFL): numpy's passes along the inner axis; last: the row loop."""
    x = RNG.standard_normal(shape).astype(np.float32) * 4
    x.ravel()[:2] = [np.inf, -np.inf]
    graph = _graph({"x": x}, "Softmax", ["x"], dict(axis=axis, use_log=log))
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast"
    with np.errstate(all="ignore"):
        got, want, again = fast.run({"x": x})["y"], ref.run({"x": x})["y"], fast.run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7)
    np.testing.assert_array_equal(got, again)


@pytest.mark.parametrize("shape,axis,length", [
    ((1, 5, 1, 2048, 1), 3, 2048), ((1, 5, 1, 1000, 1), 3, 1024), ((2, 30, 3, 1), 1, 17), ((1, 9, 1, 512, 1), 3, 500),
])
def test_dft_real_one_sided_is_rfft_within_rounding_noise(shape, axis, length):
    """rfft's bins against the reference's full FFT cut to one side: the same values up to the
    full FFT's rounding noise (~1e-7 of the largest bin; e.g. the DC bin's imaginary part)."""
    x = (RNG.standard_normal(shape) * 100).astype(np.float32)
    graph = _graph({"x": x}, "DFT", ["x"], dict(axis=axis, length=length, onesided=1))
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast"
    got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("last", [1, 2])
@pytest.mark.parametrize("inverse", [0, 1])
def test_dft_of_length_one_is_the_reference_bytes(last, inverse):
    """The same bytes on finite values; on inf and -0.0 imaginary parts the reference's complex
    construction (re + 1j * im: 1j * inf has a NaN real part, + 0.0 drops a -0.0) changes them,
    where the one-point DFT keeps its input, as the copy does."""
    x = RNG.standard_normal((1, 6, 1, 9, last)).astype(np.float32)
    both("DFT", x, dict(axis=2, length=1, inverse=inverse))
    if last == 2:
        x.ravel()[:4] = [1.0, np.inf, 2.0, -0.0]
        graph = _graph({"x": x}, "DFT", ["x"], dict(axis=2, length=1, inverse=inverse))
        assert Engine(graph).run({"x": x})["y"].tobytes() == x.tobytes()


def test_dft_other_forms_stay_with_the_reference():
    both("DFT", sample((1, 8, 2)), dict(axis=1, length=8), fast_expected=False)
    both("DFT", sample((1, 8, 2)), dict(axis=1, length=8, inverse=1), fast_expected=False)


@pytest.mark.skipif(loops() is None, reason="numba is not installed")
@pytest.mark.parametrize("shape,size", [((1, 10, 10, 24), (80, 80)), ((2, 3, 4, 5), (6, 12)), ((1, 3, 4, 2), (9, 4))])
def test_resize_nearest_by_whole_factors_is_one_broadcast_copy(shape, size):
    x = sample(shape)
    args = dict(size=list(size), scale=[size[0] / shape[1], size[1] / shape[2]],
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    both("ResizeNearestNeighbor", x, args)
    graph = _graph({"x": x}, "ResizeNearestNeighbor", ["x"], dict(args, data_format="NHWC"))
    assert Engine(graph).nodes[0].kernel.factors == (size[0] // shape[1], size[1] // shape[2])


@pytest.mark.skipif(loops() is None, reason="numba is not installed")
@pytest.mark.parametrize("code,eta,keep", [("CENTER_SIZE", 1.0, 50), ("CORNER", 0.7, -1), ("CORNER_SIZE", 1.0, 5)])
def test_detection_output_with_the_compiled_nms_is_the_reference_bytes(code, eta, keep):
    """Many overlapping priors (so NMS suppresses), NaN and tied scores: the same rows."""
    rng = np.random.default_rng(8)
    p = 300
    centres = rng.uniform(0.2, 0.8, (p, 2))
    sizes = rng.uniform(0.05, 0.3, (p, 2))
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], 1)
    prior = np.stack([boxes.ravel(), np.tile([0.1, 0.1, 0.2, 0.2], p)])[None].astype(np.float32)
    loc = (rng.standard_normal((2, p * 4)) * 0.5).astype(np.float32)
    conf = rng.dirichlet(np.ones(3), (2, p)).reshape(2, p * 3).astype(np.float32)
    conf[0, :30] = 0.5   # ties
    loc[1, 8:12] = np.nan
    args = dict(num_classes=3, share_location=1, background_label_id=0, nms_threshold=0.45, top_k=100,
                eta=eta, code_type=code, keep_top_k=keep, confidence_threshold=0.05)
    feed = {"loc": loc, "conf": conf, "prior": prior}
    both_graph(_graph(feed, "DetectionOutput", ["loc", "conf", "prior"], args), feed)


@pytest.mark.skipif(loops() is None, reason="numba is not installed")
@pytest.mark.parametrize("scale_size", [1, 128])
def test_normalize_per_position_within_one_ulp(scale_size):
    """SSD's conv4_3 L2 norm: float64 like the reference, its sum in order (numpy's is pairwise)."""
    from tests.ops.test_fast_activations import ulps
    x = sample((1, 9, 7, 128))
    x.ravel()[:4] = [np.nan, 1e20, -0.0, 0.0]
    scale = RNG.uniform(5, 20, scale_size).astype(np.float32)
    graph = _graph({"x": x}, "Normalize", ["x", "s"], dict(across_spatial=0, axis=3, eps=1e-10), {"s": scale})
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast"
    assert ulps(fast.run({"x": x})["y"], ref.run({"x": x})["y"]).max() <= 1
    both_graph(_graph({"x": x}, "PriorBox", ["x", "x"], dict(min_size=[30.0], img_h=300, img_w=300,
                                                           variance=[0.1, 0.1, 0.2, 0.2], flip=1, clip=0)),
               {"x": x})


# The op types of float nodes in the 45 corpus rows (benchmarks/zoo_manifest.yml), counted from
# each converted row's engine (issue 33's survey, 2026-11-29). A new corpus row with a float op
# type not listed here: run the survey again and add it, with a cpu:fast kernel.
CORPUS_FLOAT_OPS = (
    "Activation", "BatchNorm", "Cast", "Concat", "Conv2D", "DFT", "Deconv2D", "DepthToSpace",
    "DepthwiseConv2d", "DetectionOutput", "Eltwise", "FakeQuantize", "FullyConnected", "Gather",
    "LSTM", "LayerNorm", "MatMul", "Normalize", "Pad", "Pooling", "PriorBox", "Reduce", "Reshape",
    "ResizeBilinear", "ResizeNearestNeighbor", "Select", "Softmax", "Split", "StridedSlice", "Transpose",
)


def test_every_float_op_type_of_the_corpus_has_a_fast_kernel():
    """The meta-test of issue 33 item 1: each op type the corpus runs on float tensors has a
    cpu:fast kernel (which of its forms it takes is each kernel's own test)."""
    from mace.ops.registry import spec
    missing = [op for op in CORPUS_FLOAT_OPS if "cpu:fast" not in spec(op).kernels]
    assert not missing, f"corpus float op types on the numpy reference only: {missing}"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,pads,fill", [
    ((1, 32, 32, 32), (1, 1, 1, 1), 0.0),           # gender_v1's 3x3 convs: split across threads
    ((2, 5, 7, 3), (2, 0, 1, 3), -np.inf),          # two images, asymmetric, a max pool's fill
    ((1, 1, 9, 4), (0, 4, 0, 4), 0.0),              # a 1-D map's columns only
    ((1, 3, 1, 1), (3, 1, 2, 1), 0.5),              # pads wider than the map
    ((1, 0, 4, 2), (1, 1, 1, 1), 0.0),              # nothing to copy: only the fill
])
def test_spatial_padding_is_one_compiled_pass(shape, pads, fill, threads):
    """A conv's or pool's padded input (_conv_gemm.pad_steps): one step writing np.pad's bytes
    (NaN, inf, -0.0 copied), over a buffer holding garbage from before (the arena's scratch is
    shared), split on a pool of two threads when the map is large."""
    from mace.ops.fast._conv_gemm import pad_steps
    from mace.ops.fast._jit import op_loops
    from mace.ops.fast._pool import MIN_PARALLEL_WORK
    from mace.ops.fast.compute import ComputeContext, SERIAL
    t, l, b, r = pads
    x = sample(shape)
    want = np.pad(x, [(0, 0), (t, b), (l, r), (0, 0)], constant_values=np.float32(fill))
    xp = np.full(want.shape, 7.0, np.float32)
    compute = ComputeContext(threads) if threads > 1 else SERIAL
    steps = pad_steps(xp, x, pads, fill, compute)
    assert len(steps) == 1 or loops() is None
    if compute.active() and x.size + xp.size >= MIN_PARALLEL_WORK:   # a pool step, not the serial loop
        assert getattr(steps[0], "func", None) is not op_loops("_pad_loops").pad_image
    with compute.session():
        for step in steps:
            step()
    assert xp.tobytes() == want.tobytes()
    # a channel slice (not contiguous) and a non-float map keep numpy's copies, same bytes
    q = sample((1, 4, 5, 6))[..., 1:4]
    qp = np.full((1, 4 + t + b, 5 + l + r, 3), 7.0, np.float32)
    for step in pad_steps(qp, q, pads, fill):
        step()
    assert qp.tobytes() == np.pad(q, [(0, 0), (t, b), (l, r), (0, 0)], constant_values=np.float32(fill)).tobytes()


@pytest.mark.parametrize("threads", [1, 2])
def test_pad_of_rows_and_columns_runs_the_conv_padding_pass(threads):
    x = sample((1, 40, 40, 16))
    graph = Graph()
    add_input_info(graph, TensorSpec("x", x.shape, "NONE", dtype="float32"))
    graph.add_op("Pad", ["x"], ["y"], data_format="NHWC", paddings=[0, 1, 3, 0, 0, 2, 0, 0],
                 pad_type="CONSTANT", constant_value=0.25)
    add_output_info(graph, TensorSpec("y", None, "NONE"))
    infer_shapes(graph)
    fast = Engine(graph, options={"num_threads": threads})
    ref = Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].kernel.spatial_only and not fast.nodes[0].kernel.last_axis_only
    for _ in range(2):
        assert fast.run({"x": x})["y"].tobytes() == ref.run({"x": x})["y"].tobytes()
