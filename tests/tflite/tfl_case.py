"""Make small .tflite models with TensorFlow's converter and compare our engine with LiteRT on them.

`to_tflite(fn, shapes, mode)` traces `fn` on float32 inputs named x0, x1, ... and
converts it: mode "float", "sparse" (mostly-zero weights stored sparse behind
DENSIFY), "fp16" (fp16 weights behind DEQUANTIZE) or "int8"
(full integer ops, float input/output, calibrated on seeded uniform [-1, 1]
samples). `ours(path, inputs, quantize)` converts the file with our frontend and
pass list and runs the CPU engine; `litert(path, inputs)` is the reference.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

for _module, _why in (("tensorflow", "tensorflow-cpu (the [tf] extra) makes the test models"),
                      ("tflite", "the tflite package (the [tflite] extra) reads them"),
                      ("ai_edge_litert", "ai-edge-litert (the [tflite] extra) is the reference")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"the TFLite tests need {_why}", allow_module_level=True)

from mace.frontends import convert  # noqa: E402
from mace.config.specs import ModelSpec, TensorSpec  # noqa: E402
from mace.frontends.tensorflow.loader import import_tf  # noqa: E402
from mace.frontends.tflite.model_file import read_model  # noqa: E402
from mace.runtime.engine import Engine  # noqa: E402
from mace.transform.pipeline import transform  # noqa: E402
from mace.validate.metrics import cosine  # noqa: E402
from mace.validate.reference import run_litert  # noqa: E402

tf = import_tf()


def rand(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def to_tflite(fn, shapes: list, path, mode: str = "float"):
    specs = [tf.TensorSpec(s, tf.float32, name=f"x{i}") for i, s in enumerate(shapes)]
    concrete = tf.function(fn, autograph=False).get_concrete_function(*specs)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    if mode == "sparse":   # weights stored sparse, expanded by DENSIFY ops
        conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    elif mode == "fp16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif mode == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]

        def samples():
            for k in range(16):
                yield [rand(*s, seed=100 + 7 * k + i) for i, s in enumerate(shapes)]
        conv.representative_dataset = samples
    path.write_bytes(conv.convert())
    return path


def io_names(path):
    m = read_model(path)
    return [m.tensors[i].name for i in m.inputs], [m.tensors[i].name for i in m.outputs]


def op_types(path) -> set:
    return {op.type for op in read_model(path).ops}


def feeds(path, seed=0):
    m = read_model(path)
    return {m.tensors[i].name: rand(*m.tensors[i].shape, seed=seed + i) for i in m.inputs}


def ours(path, inputs: dict, quantize=False, runtime="cpu") -> dict:
    ins, outs = io_names(path)
    m = read_model(path)
    spec = ModelSpec(path, [TensorSpec(n, tuple(np.shape(inputs[n])), "NONE") for n in ins],
                     [TensorSpec(n, None, "NONE") for n in outs])
    graph = convert("tflite", spec)
    transform(graph, {"quantize": quantize, "runtime": runtime})
    assert m.tensors  # the model was read once more, as the frontend did
    return Engine(graph).run(inputs)


def litert(path, inputs: dict) -> dict:
    return run_litert(path, inputs, io_names(path)[1])


def compare(path, inputs=None, quantize=False, min_cosine=None, rtol=1e-4, atol=1e-5) -> float:
    """Assert our outputs match LiteRT's (closely, or to `min_cosine`); the lowest cosine."""
    inputs = inputs or feeds(path)
    got, want = ours(path, inputs, quantize), litert(path, inputs)
    worst = 1.0
    for name, expected in want.items():
        g, e = np.asarray(got[name]), np.asarray(expected)
        assert g.shape == e.shape, f"{name}: shape {g.shape} != {e.shape}"
        c = cosine(e.astype(np.float64), g.astype(np.float64))
        worst = min(worst, c)
        if min_cosine is None:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=name)
        else:
            assert c >= min_cosine, f"{name}: cosine {c:.6f} < {min_cosine}"
    return worst
