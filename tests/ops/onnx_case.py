"""Build one-node ONNX models and compare our engine with onnxruntime on them."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from mace import onnx_backend

NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
              np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL,
              np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.float16): TensorProto.FLOAT16,
              np.dtype(np.float64): TensorProto.DOUBLE}


def make_model(op_type, inputs: dict, consts: dict | None = None, attrs: dict | None = None,
               n_outputs: int = 1, opset: int = 17, input_order=None, out_types=None):
    """A model with one `op_type` node. `inputs` are graph inputs, `consts` initializers.

    `input_order` lists node input names in order ('' for an omitted optional input);
    by default inputs then consts. `out_types` are the outputs' numpy dtypes (float32).
    """
    consts = consts or {}
    order = input_order or list(inputs) + list(consts)
    node = helper.make_node(op_type, order, [f"y{i}" for i in range(n_outputs)], **(attrs or {}))
    graph = helper.make_graph(
        [node], "case",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[np.asarray(v).dtype], np.shape(v))
         for n, v in inputs.items()],
        [helper.make_tensor_value_info(f"y{i}", NP_TO_ONNX[np.dtype(t)], None)
         for i, t in enumerate(out_types or [np.float32] * n_outputs)],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 8 if opset <= 17 else 10)  # what onnxruntime reads
    return model


def run_ort(model, inputs: dict) -> list:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)


def check(op_type, inputs: dict, consts=None, attrs=None, n_outputs=1, opset=17,
          rtol=1e-4, atol=1e-5, input_order=None, out_types=None):
    """Assert our engine matches onnxruntime on a one-node model; returns our outputs."""
    model = make_model(op_type, inputs, consts, attrs, n_outputs, opset, input_order, out_types)
    expected = run_ort(model, inputs)
    got = onnx_backend.run(model, inputs)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, f"{op_type} output {i}: shape {g.shape} != {e.shape}"
        assert g.dtype == e.dtype, f"{op_type} output {i}: dtype {g.dtype} != {e.dtype}"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"{op_type} output {i}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"{op_type} output {i}")
    return got


def rand(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
