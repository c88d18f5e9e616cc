"""The fast MatMulInteger (mace/ops/fast/matmul_integer.py): onnxruntime's int32 results byte for
byte (quantize_dynamic's DynamicQuantizeLinear -> MatMulInteger, zero points of every kind, 1
and 2 threads): the integer GEMM for a uint8 A, the float32 one for an int8 A, and the
reference where float32 sums could round or B is not a constant."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace import onnx_backend
from mace.ops.fast._jit import op_loops
from mace.runtime.engine import Engine
from tests.ops.onnx_graph import run_ort

pytestmark = pytest.mark.skipif(op_loops("_integer_loops") is None,
                                reason="numba is not installed here: no compiled loops")
RNG = np.random.default_rng(21)


def _model(x_shape, b, b_zero=None, b_const=True, signed_a=None):
    """x (float) -> DynamicQuantizeLinear -> MatMulInteger(codes, B, zero[, b_zero]) -> int32 y;
    with signed_a (A's int8 zero point) x is an int8 A itself."""
    if signed_a is None:
        nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "scale", "zero"])]
        inits = []
    else:
        nodes = [helper.make_node("Identity", ["x"], ["q"])]
        inits = [numpy_helper.from_array(np.asarray(signed_a, np.int8), "zero")]
    inputs = ["q", "B", "zero"] + (["b_zero"] if b_zero is not None else [])
    nodes.append(helper.make_node("MatMulInteger", inputs, ["y"]))
    inits += [numpy_helper.from_array(b, "B")] if b_const else []
    if b_zero is not None:
        inits.append(numpy_helper.from_array(b_zero, "b_zero"))
    x_type = TensorProto.FLOAT if signed_a is None else TensorProto.INT8
    graph_inputs = [helper.make_tensor_value_info("x", x_type, x_shape)]
    if not b_const:
        graph_inputs.append(helper.make_tensor_value_info("B", TensorProto.INT8, b.shape))
    graph = helper.make_graph(nodes, "mmi", graph_inputs, [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _run(model, feeds, threads, passes=None):
    # prepare's options reach the passes; the engine's own set its threads
    graph = onnx_backend.prepare(model, feeds, options=passes).graph
    engine = Engine(graph, options={"num_threads": threads})
    return engine, engine.run(feeds)["y"]


def _kernels(engine):
    return [(n.tag, n.kernel.algorithm_name) for n in engine.nodes if n.op.type == "MatMulInteger"]


def _weights(zero, k, n):
    b = RNG.integers(-128, 128, size=(k, n)).astype(np.int8)
    b_zero = {"none": None, "scalar": np.int8(3), "per column": RNG.integers(-5, 5, n).astype(np.int8),
              "uint8 weights": np.uint8(131)}[zero]
    if zero == "uint8 weights":
        b = RNG.integers(0, 256, size=(k, n)).astype(np.uint8)
    return b, None if b_zero is None else np.asarray(b_zero)


ZEROS = ["none", "scalar", "per column", "uint8 weights"]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("zero", ZEROS)
def test_matches_onnxruntime_byte_for_byte(zero, threads):
    x = (RNG.normal(size=(1, 16, 96)) * 2 + 0.5).astype(np.float32)
    model = _model(x.shape, *_weights(zero, 96, 70))
    engine, got = _run(model, {"x": x}, threads)
    assert _kernels(engine) == [("cpu:fast", "int8")]
    want = run_ort(model, {"x": x})[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, n", [((13, 97), 33), ((1, 5), 16), ((3, 40, 64), 200), ((7, 1), 1)])
@pytest.mark.parametrize("x_kind", ["mixed", "positive", "negative"])
def test_integer_gemm_ragged_shapes_and_extreme_zero_points(shape, n, x_kind, threads):
    """Row counts off every tile size, K off the 4-byte step (the rows copied with slack), ragged
    column panels, and A's run-time zero point at 0 (x >= 0) and 255 (x <= 0)."""
    x = RNG.normal(size=shape).astype(np.float32) * 3
    x = {"mixed": x, "positive": np.abs(x), "negative": -np.abs(x)}[x_kind]
    for zero in ZEROS:
        model = _model(x.shape, *_weights(zero, shape[-1], n))
        engine, got = _run(model, {"x": x}, threads)
        assert _kernels(engine) == [("cpu:fast", "int8")]
        np.testing.assert_array_equal(got, run_ort(model, {"x": x})[0], err_msg=zero)


@pytest.mark.parametrize("zero", ZEROS)
def test_an_int8_a_takes_the_float32_gemm(zero):
    x = RNG.integers(-128, 128, size=(2, 9, 96)).astype(np.int8)
    model = _model(x.shape, *_weights(zero, 96, 70), signed_a=-7)
    engine, got = _run(model, {"x": x}, 1)
    assert _kernels(engine) == [("cpu:fast", "packed")]
    np.testing.assert_array_equal(got, run_ort(model, {"x": x})[0])


def _past_float32(signed_a):
    """K = 4096 of full-range weights: the sums pass 2^24 (onnxruntime's are exact)."""
    k = 4096
    b = np.where(RNG.random((k, 40)) < 0.5, -127, 127).astype(np.int8)
    b[: k // 2] = -127   # the negative codes (0 after the zero point 127 or 128) add up
    if signed_a is None:
        x = np.concatenate([np.full(k // 2, -1.0), np.full(k // 2, 1.0)]).astype(np.float32).reshape(1, k)
    else:
        x = np.concatenate([np.full(k // 2, -128), np.full(k // 2, 127)]).astype(np.int8).reshape(1, k)
    return x, _model(x.shape, b, signed_a=signed_a)


def test_sums_past_float32_are_exact_on_the_integer_gemm():
    x, model = _past_float32(None)
    engine, got = _run(model, {"x": x}, 1)
    assert _kernels(engine) == [("cpu:fast", "int8")]
    want = run_ort(model, {"x": x})[0]
    assert np.abs(want).max() > 2**24   # the case this test is for
    np.testing.assert_array_equal(got, want)


def test_an_int8_a_whose_float32_sums_could_round_runs_the_reference():
    x, model = _past_float32(0)
    engine, got = _run(model, {"x": x}, 1)
    assert [n.tag for n in engine.nodes if n.op.type == "MatMulInteger"] == ["cpu"]
    want = run_ort(model, {"x": x})[0]
    assert np.abs(want).max() > 2**24
    np.testing.assert_array_equal(got, want)


def test_b_not_constant_runs_the_reference():
    x = RNG.normal(size=(4, 32)).astype(np.float32)
    b = RNG.integers(-128, 128, size=(32, 8)).astype(np.int8)
    model = _model(x.shape, b, b_const=False)
    engine, got = _run(model, {"x": x, "B": b}, 1)
    assert [n.tag for n in engine.nodes if n.op.type == "MatMulInteger"] == ["cpu"]
    np.testing.assert_array_equal(got, run_ort(model, {"x": x, "B": b})[0])


def _dynamic_matmul(x_shape, b, b_scale, bias, b_zero=None, signed_a=None):
    """quantize_dynamic's chain: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(x_scale *
    w_scale) -> Add(bias) (no Add where bias is None); an int8 A (signed_a: its zero point)
    comes in as a graph input with its scale a constant."""
    if signed_a is None:
        nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "x_scale", "zero"])]
        inits = []
    else:
        nodes = [helper.make_node("Identity", ["x"], ["q"])]
        inits = [numpy_helper.from_array(np.asarray(signed_a, np.int8), "zero"),
                 numpy_helper.from_array(np.float32(0.02), "x_scale")]
    inputs = ["q", "B", "zero"] + (["b_zero"] if b_zero is not None else [])
    nodes += [helper.make_node("Mul", ["x_scale", "w_scale"], ["s"]),
              helper.make_node("MatMulInteger", inputs, ["acc"]),
              helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
              helper.make_node("Mul", ["accf", "s"], ["y" if bias is None else "m"])]
    inits += [numpy_helper.from_array(b, "B"), numpy_helper.from_array(np.asarray(b_scale, np.float32), "w_scale")]
    if b_zero is not None:
        inits.append(numpy_helper.from_array(b_zero, "b_zero"))
    if bias is not None:
        nodes.append(helper.make_node("Add", ["bias", "m"], ["y"]))
        inits.append(numpy_helper.from_array(bias, "bias"))
    x_type = TensorProto.FLOAT if signed_a is None else TensorProto.INT8
    graph = helper.make_graph(nodes, "dmm", [helper.make_tensor_value_info("x", x_type, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


UNFUSED = {"skip_passes": ["fuse_matmul_integer_to_float"]}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("zero", ZEROS)
@pytest.mark.parametrize("per_column, with_bias, signed", [(False, True, False), (True, True, False),
                                                           (False, False, False), (True, True, True)])
def test_scaled_chain_is_one_op_with_the_unfused_bytes(zero, per_column, with_bias, signed, threads):
    """MatMulInteger -> Cast -> Mul(scale) -> Add(bias) is one scaled MatMulInteger
    (fuse_matmul_integer_to_float): the unfused graph's bytes (same float32 roundings), on the
    integer GEMM (uint8 A) and on the float32 one (int8 A); onnxruntime's values within float32
    rounding (its optimizer fuses the chain its own way)."""
    b, b_zero = _weights(zero, 96, 70)
    b_scale = RNG.uniform(0.001, 0.01, 70 if per_column else 1).astype(np.float32).reshape(-1 if per_column else ())
    bias = RNG.normal(size=70).astype(np.float32) if with_bias else None
    if signed:
        x = RNG.integers(-128, 128, size=(1, 16, 96)).astype(np.int8)
    else:
        x = (RNG.normal(size=(1, 16, 96)) * 2).astype(np.float32)
    model = _dynamic_matmul(x.shape, b, b_scale, bias, b_zero, signed_a=-3 if signed else None)
    engine, got = _run(model, {"x": x}, threads)
    kinds = [n.op.type for n in engine.nodes]
    # the run-time scale product stays (a constant one folds); no Cast, no Mul or Add after it
    assert "Cast" not in kinds and kinds.count("Eltwise") == (0 if signed else 1)
    assert _kernels(engine) == [("cpu:fast", "packed" if signed else "int8")]
    unfused, want = _run(model, {"x": x}, threads, UNFUSED)
    assert [n.op.type for n in unfused.nodes].count("Cast") == 1
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-6, atol=1e-6)


def test_scaled_chain_with_another_reader_stays_apart():
    """The Cast's output also read elsewhere (or a model output): nothing fuses."""
    b, _ = _weights("none", 32, 8)
    model = _dynamic_matmul((4, 32), b, np.float32(0.01), None)
    model.graph.output.append(helper.make_tensor_value_info("accf", TensorProto.FLOAT, None))
    x = RNG.normal(size=(4, 32)).astype(np.float32)
    graph = onnx_backend.prepare(model, {"x": x}).graph
    assert [op.type for op in graph.net.op].count("Cast") == 1
    outputs = Engine(graph).run({"x": x})
    np.testing.assert_array_equal(outputs["y"], run_ort(model, {"x": x})[0])


def test_the_run_time_zero_point_is_a_step_a_chain_takes():
    """A's zero point (DynamicQuantizeLinear's, known per run) reaches the int8 tile through a
    compiled step (it was a Python call, ~1.7 us each: 18 in a MiniLM run), and a chained engine
    (after its first run here) gives onnxruntime's bytes for new inputs, zero points 0 and 255."""
    from mace.ops.fast.chain import _entry
    x = (RNG.normal(size=(1, 16, 96)) * 2 + 0.5).astype(np.float32)
    model = _model(x.shape, *_weights("scalar", 96, 70))
    engine = Engine(onnx_backend.prepare(model, {"x": x}).graph, options={"chain_after_runs": 1})
    lib = op_loops("_integer_loops")
    engine.run({"x": x})
    (step,) = [c for c in engine._calls[0] if getattr(c, "func", None) is lib.zero_correction]
    assert _entry(step) is not None
    for feed in (x, np.abs(x), -np.abs(x)):
        np.testing.assert_array_equal(engine.run({"x": feed})["y"], run_ort(model, {"x": feed})[0])
