"""Multi-node ONNX models (and one-node models at any opset) vs onnxruntime.

onnx_case.make_model keeps onnx's newest IR version for opset > 17, which
onnxruntime may not load yet; models built here cap it at one it reads.
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from mace import onnx_backend
from tests.ops.onnx_case import NP_TO_ONNX, make_model, run_ort

IR_VERSION = 10  # onnx 1.16; covers opsets up to 21, read by every onnxruntime we test with


def graph_model(nodes, inputs: dict, outputs: dict, consts: dict | None = None, opset: int = 17):
    """A model from onnx.helper `nodes`; `outputs` maps output names to numpy dtypes."""
    graph = helper.make_graph(
        nodes, "case",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[np.asarray(v).dtype], np.shape(v))
         for n, v in inputs.items()],
        [helper.make_tensor_value_info(n, NP_TO_ONNX[np.dtype(t)], None) for n, t in outputs.items()],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in (consts or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, IR_VERSION)
    return model


def check_model(model, inputs: dict, rtol=1e-4, atol=1e-5):
    """Assert our engine matches onnxruntime on `model`; returns (our outputs, engine)."""
    expected = run_ort(model, inputs)
    engine = onnx_backend.prepare(model, inputs)
    result = engine.run(inputs)
    got = [result[n] for n in engine.graph.output_names]
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, f"output {i}: shape {g.shape} != {e.shape}"
        assert g.dtype == e.dtype or e.dtype == np.float64, f"output {i}: {g.dtype} != {e.dtype}"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"output {i}")
    return got, engine


def check_op(op_type, inputs: dict, consts=None, attrs=None, n_outputs=1, opset=17,
             rtol=1e-4, atol=1e-5, input_order=None, out_types=None):
    """onnx_case.check for any opset, also asserting output dtypes; returns the engine."""
    model = make_model(op_type, inputs, consts, attrs, n_outputs, opset, input_order, out_types)
    model.ir_version = min(model.ir_version, IR_VERSION)
    return check_model(model, inputs, rtol, atol)[1]


def op_types(engine) -> list:
    return [op.type for op in engine.graph.net.op]
