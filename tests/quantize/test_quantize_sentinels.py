"""quantize: 1 on models holding -inf / inf / float32-extreme constants (attention masks, logit
clamps): the ops touching them stay float, the rest is quantized (issue 34 item 5)."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from mace.onnx_backend import prepare
from mace.quantize.calibrate import collect_ranges

F32 = np.float32


def _model(mask_value, clamp):
    rng = np.random.default_rng(0)
    w1, w2 = (rng.normal(0, 0.4, (8, 8)).astype(F32) for _ in range(2))
    mask = np.zeros((1, 8), F32)
    mask[0, 5:] = mask_value
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["s"]),
             helper.make_node("Add", ["s", "mask"], ["m"]),
             helper.make_node("Min", ["m", "clamp"], ["c"]),
             helper.make_node("Softmax", ["c"], ["y"], axis=-1)]
    inits = {"w1": w1, "w2": w2, "mask": mask, "clamp": np.array(clamp, F32)}
    graph = helper.make_graph(nodes, "masked", [helper.make_tensor_value_info("x", 1, [4, 8])],
                              [helper.make_tensor_value_info("y", 1, [4, 8])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("mask_value,clamp", [(-np.inf, np.inf), (np.finfo(F32).min, np.finfo(F32).max),
                                              (-np.inf, 30.0)])
def test_mask_and_clamp_constants_stay_float(mask_value, clamp):
    """Was "pass 'quantize' failed: cannot convert float NaN to integer"."""
    model = _model(mask_value, clamp)
    rng = np.random.default_rng(1)
    samples = [{"x": rng.normal(size=(4, 8)).astype(F32)} for _ in range(4)]
    q = prepare(model, samples[0], options={"quantize": True,
                                            "calibrate": lambda g: collect_ranges(g, samples)})
    types = [op.type for op in q.graph.net.op]
    assert "Quantize" in types and "Dequantize" in types, types   # the first MatMul is int8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for feed in samples:
        want = session.run(None, feed)[0]
        got = q.run(feed)["y"]
        assert np.all(got[:, 5:] == 0) and np.all(want[:, 5:] == 0)   # the mask still masks
        cos = float(got.ravel() @ want.ravel() / np.linalg.norm(got) / np.linalg.norm(want))
        assert cos > 0.99, cos
        assert np.abs(got - want).max() < 0.05
