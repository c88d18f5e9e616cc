"""The fast DynamicQuantize (mace/ops/fast/dynamic_quantize.py): the reference's bytes (codes,
scale, zero point) over edge cases, and through the engine against onnxruntime's
DynamicQuantizeLinear."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from mace import onnx_backend
from mace.ops.dynamic_quantize import dynamic_quantize
from mace.ops.fast._jit import op_loops
from tests.ops.onnx_graph import run_ort

LOOPS = op_loops("_quantize_loops")
pytestmark = pytest.mark.skipif(LOOPS is None, reason="numba is not installed here: no compiled loops")
RNG = np.random.default_rng(5)


def _cases():
    normal = RNG.normal(size=1536).astype(np.float32)
    yield "normal", normal
    yield "positive", np.abs(normal) + 1
    yield "negative", -np.abs(normal) - 1
    yield "zeros", np.zeros(64, np.float32)
    yield "negative zero", np.full(8, -0.0, np.float32)
    yield "one", np.array([3.5], np.float32)
    yield "empty", np.zeros(0, np.float32)
    yield "halves", np.arange(-255, 256, dtype=np.float32) / 2   # codes exactly half-way: to even
    yield "denormals", np.array([1e-45, -1e-44, 3e-40, 0], np.float32)
    yield "huge", np.array([3e38, -3e38, 1.0], np.float32)
    yield "nan", np.where(np.arange(100) == 37, np.nan, normal[:100]).astype(np.float32)
    yield "inf", np.array([np.inf, 1.0, -2.0], np.float32)
    yield "both infs", np.array([np.inf, -np.inf, 1.0], np.float32)
    # the range is taken on the floats' bits as ordered integers: the edges of that order
    yield "negative nan", -np.abs(np.where(np.arange(40) == 3, np.nan, normal[:40])).astype(np.float32)
    yield "negative zero and positives", np.array([-0.0, 2.0, 0.5, -0.0], np.float32)
    yield "minus inf only", np.array([-np.inf, -1.0], np.float32)
    yield "largest and smallest", np.array([np.finfo(np.float32).max, -np.finfo(np.float32).tiny], np.float32)


@pytest.mark.parametrize("name, x", list(_cases()), ids=[n for n, _ in _cases()])
def test_the_loop_gives_the_references_bytes(name, x):
    with np.errstate(all="ignore"):
        y, scale, zero = dynamic_quantize(x)
    got_y, got_s, got_z = np.empty(x.size, np.uint8), np.empty(1, np.float32), np.empty(1, np.uint8)
    LOOPS.dynamic_quantize(x, got_y, got_s, got_z)
    np.testing.assert_array_equal(got_y, y.reshape(-1))
    assert got_s[0].tobytes() == np.float32(scale).tobytes() and got_z[0] == zero


def test_the_engine_runs_it_and_matches_onnxruntime():
    x = (RNG.normal(size=(1, 16, 384)) * 3).astype(np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero"])
    graph = helper.make_graph([node], "dq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None),
                               helper.make_tensor_value_info("scale", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("zero", TensorProto.UINT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    engine = onnx_backend.prepare(model, {"x": x})
    assert [n.tag for n in engine.nodes if n.op.type == "DynamicQuantize"] == ["cpu:fast"]
    got = engine.run({"x": x})
    for name, want in zip(("y", "scale", "zero"), run_ort(model, {"x": x})):
        np.testing.assert_array_equal(got[name], want, err_msg=name)
