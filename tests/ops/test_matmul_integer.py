"""MatMulInteger with a constant B (onnxruntime's quantize_dynamic weights) is exact, as onnxruntime's
int32 result is: summed in float32 where B's column sums bound every partial sum below 2^24, in
float64 where they do not (full-range weights over 1,024 terms), on stacked rows [2, 16, K]."""
import numpy as np
import pytest
from onnx import helper

from mace import onnx_backend
from tests.ops.onnx_case import run_ort
from tests.ops.onnx_graph import graph_model


@pytest.mark.parametrize("k, peak", [(384, 20), (1024, 127)])   # float32 path, float64 path
def test_matmul_integer_with_a_constant_weight_is_exact(k, peak):
    rng = np.random.default_rng(k)
    a = rng.integers(0, 256, (2, 16, k)).astype(np.uint8)
    b = rng.integers(-peak, peak + 1, (k, 24)).astype(np.int8)
    b[:, 0] = peak   # one column at its bound: 255 * k * 127 passes 2^24 on the float64 case
    nodes = [helper.make_node("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["y"])]
    consts = {"b": b, "a_zero": np.array(131, np.uint8), "b_zero": np.array(0, np.int8)}
    model = graph_model(nodes, {"a": a}, {"y": np.int32}, consts, opset=13)
    (want,) = run_ort(model, {"a": a})
    engine = onnx_backend.prepare(model, {"a": a})
    got = engine.run({"a": a})[engine.graph.output_names[0]]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
