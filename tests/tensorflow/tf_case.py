"""Freeze small TensorFlow functions to GraphDefs and compare our engine with TensorFlow on them.

`check(fn, inputs)` traces `fn` (inputs named after the dict keys), freezes it to a
.pb, runs it in TensorFlow (through the validation reference) and through our
frontend, pass list and CPU engine, and asserts the outputs agree.
"""
from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mace.frontends.tensorflow.loader import import_tf

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("the TensorFlow frontend tests need tensorflow-cpu (the [tf] extra)",
                allow_module_level=True)
# Imported as the frontend does it (quiet, RTLD_LOCAL: the GPU tests' OpenCL may share this process).
tf = import_tf()

from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

from mace.frontends import convert  # noqa: E402
from mace.config.specs import ModelSpec, TensorSpec  # noqa: E402
from mace.onnx_backend import dtype_name  # noqa: E402
from mace.runtime.engine import Engine  # noqa: E402
from mace.transform.pipeline import transform  # noqa: E402
from mace.validate.reference import run_tensorflow  # noqa: E402


def freeze(fn, inputs: dict, unknown_batch=False):
    """(GraphDef, output tensor names) of `fn` traced on placeholders named like `inputs`;
    `unknown_batch` leaves their first axis undefined (as Keras does: shapes then come
    from Shape ops at run time)."""
    specs = [tf.TensorSpec((None,) * unknown_batch + np.shape(v)[unknown_batch:],
                           tf.as_dtype(np.asarray(v).dtype), name=k) for k, v in inputs.items()]
    frozen = convert_variables_to_constants_v2(tf.function(fn, autograph=False).get_concrete_function(*specs))
    return frozen.graph.as_graph_def(), [t.name for t in frozen.outputs]


def save_pb(path: Path, graph_def) -> Path:
    path.write_bytes(graph_def.SerializeToString(deterministic=True))
    return path


def convert_pb(path, inputs: dict, outputs: list, options=None):
    """Our converted, optimised Graph of the .pb at `path` (tensors in the model's own layout)."""
    spec = ModelSpec(model_path=Path(path),
                     inputs=[TensorSpec(n, tuple(np.shape(v)), "NONE", dtype_name(np.asarray(v).dtype))
                             for n, v in inputs.items()],
                     outputs=[TensorSpec(n, None, "NONE") for n in outputs])
    graph = convert("tensorflow", spec)
    return transform(graph, options).graph


def op_types(graph_def) -> set:
    return {n.op for n in graph_def.node}


def check(fn, inputs: dict, expect_ops=(), rtol=1e-4, atol=1e-5, options=None, unknown_batch=False):
    """Assert our engine matches TensorFlow on `fn`; returns (our outputs, converted graph)."""
    graph_def, outputs = freeze(fn, inputs, unknown_batch)
    missing = set(expect_ops) - op_types(graph_def)
    assert not missing, f"the traced graph has no {missing} (it has {sorted(op_types(graph_def))})"
    with tempfile.TemporaryDirectory() as tmp:
        path = save_pb(Path(tmp) / "model.pb", graph_def)
        expected = run_tensorflow(path, inputs, outputs)
        graph = convert_pb(path, inputs, outputs, options)
    got = Engine(graph).run(inputs)
    for name in outputs:
        g, e = got[name], np.asarray(expected[name])
        assert g.shape == e.shape, f"{name}: shape {g.shape} != {e.shape}"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(g, e, err_msg=name)
    return got, graph


def rand(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
