"""The fast MatMulInteger (mace/ops/fast/matmul_integer.py): onnxruntime's int32 results byte for
byte (quantize_dynamic's DynamicQuantizeLinear -> MatMulInteger, zero points of every kind, 1
and 2 threads), and the reference where float32 sums could round or B is not a constant."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace import onnx_backend
from mace.ops.fast._jit import op_loops
from tests.ops.onnx_graph import run_ort

pytestmark = pytest.mark.skipif(op_loops("_integer_loops") is None,
                                reason="numba is not installed here: no compiled loops")
RNG = np.random.default_rng(21)


def _model(x_shape, b, b_zero=None, b_const=True):
    """x (float) -> DynamicQuantizeLinear -> MatMulInteger(codes, B, zero[, b_zero]) -> int32 y."""
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "scale", "zero"])]
    inputs = ["q", "B", "zero"] + (["b_zero"] if b_zero is not None else [])
    nodes.append(helper.make_node("MatMulInteger", inputs, ["y"]))
    inits = [numpy_helper.from_array(b, "B")] if b_const else []
    if b_zero is not None:
        inits.append(numpy_helper.from_array(b_zero, "b_zero"))
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    if not b_const:
        graph_inputs.append(helper.make_tensor_value_info("B", TensorProto.INT8, b.shape))
    graph = helper.make_graph(nodes, "mmi", graph_inputs, [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _run(model, feeds, threads):
    engine = onnx_backend.prepare(model, feeds, options={"num_threads": threads})
    return engine, engine.run(feeds)["y"]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("zero", ["none", "scalar", "per column", "uint8 weights"])
def test_matches_onnxruntime_byte_for_byte(zero, threads):
    x = (RNG.normal(size=(1, 16, 96)) * 2 + 0.5).astype(np.float32)
    b = RNG.integers(-128, 128, size=(96, 70)).astype(np.int8)
    b_zero = {"none": None, "scalar": np.int8(3), "per column": RNG.integers(-5, 5, 70).astype(np.int8),
              "uint8 weights": np.uint8(131)}[zero]
    if zero == "uint8 weights":
        b = RNG.integers(0, 256, size=(96, 70)).astype(np.uint8)
    model = _model(x.shape, b, None if b_zero is None else np.asarray(b_zero))
    engine, got = _run(model, {"x": x}, threads)
    assert [n.tag for n in engine.nodes if n.op.type == "MatMulInteger"] == ["cpu:fast"]
    want = run_ort(model, {"x": x})[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_a_weight_whose_float32_sums_could_round_runs_the_reference():
    """K = 4096 of full-range weights: the sums pass 2^24; onnxruntime's are exact."""
    k = 4096
    x = np.concatenate([np.full(k // 2, -1.0), np.full(k // 2, 1.0)]).astype(np.float32).reshape(1, k)
    b = np.where(RNG.random((k, 40)) < 0.5, -127, 127).astype(np.int8)
    b[: k // 2] = -127   # the negative codes (0 after the zero point 127 or 128) add up
    model = _model(x.shape, b)
    engine, got = _run(model, {"x": x}, 1)
    assert [n.tag for n in engine.nodes if n.op.type == "MatMulInteger"] == ["cpu"]
    want = run_ort(model, {"x": x})[0]
    assert np.abs(want).max() > 2**24   # the case this test is for
    np.testing.assert_array_equal(got, want)


def test_b_not_constant_runs_the_reference():
    x = RNG.normal(size=(4, 32)).astype(np.float32)
    b = RNG.integers(-128, 128, size=(32, 8)).astype(np.int8)
    model = _model(x.shape, b, b_const=False)
    engine, got = _run(model, {"x": x, "B": b}, 1)
    assert [n.tag for n in engine.nodes if n.op.type == "MatMulInteger"] == ["cpu"]
    np.testing.assert_array_equal(got, run_ort(model, {"x": x, "B": b})[0])
