"""Run an in-memory ONNX model through our converter and CPU engine.

Used by tests and the operator-conformance report: tensors are fed in the
model's own layout (data format NONE), so results compare 1:1 with onnxruntime.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from mace.config.specs import ModelSpec, TensorSpec
from mace.errors import ModelError
from mace.frontends import convert
from mace.ir.dtypes import BY_NAME
from mace.runtime.engine import Engine
from mace.transform.pipeline import transform

_DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
                np.dtype(np.int32): "int32", np.dtype(np.int64): "int64",
                np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8", np.dtype(np.bool_): "bool",
                np.dtype(np.int16): "int16"}


def dtype_name(dtype, tensor: str = "") -> str:
    """The IR's name for an input's numpy dtype; a ModelError (a refusal) where it has none."""
    name = _DTYPE_NAMES.get(np.dtype(dtype))
    if name is None or name not in BY_NAME:
        what = f"input '{tensor}'" if tensor else "an input"
        raise ModelError(f"{what} has element type {np.dtype(dtype)}, which pymace does not run; "
                         f"supported: {', '.join(sorted(set(_DTYPE_NAMES.values()) & set(BY_NAME)))}")
    return name


def _input_spec(name: str, value) -> TensorSpec:
    if isinstance(value, (list, tuple, dict)):   # onnx's sequence / map test values
        raise ModelError(f"input '{name}' is a {type(value).__name__}, not a tensor; pymace takes "
                         f"only tensor inputs (it has no sequence, optional or map values)")
    value = np.asarray(value)
    return TensorSpec(name, tuple(value.shape), "NONE", dtype_name(value.dtype, name))


def prepare(model, inputs: dict, output_names=None, options: dict | None = None) -> Engine:
    """Convert `model` (onnx.ModelProto) for the shapes/dtypes of `inputs` and build an engine."""
    import onnx

    output_names = output_names or [o.name for o in model.graph.output]
    spec = ModelSpec(
        model_path=None,
        inputs=[_input_spec(n, v) for n, v in inputs.items()],
        outputs=[TensorSpec(n, None, "NONE") for n in output_names],
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        spec.model_path = path
        graph = convert("onnx", spec)
    transform(graph, options)
    return Engine(graph)


def run(model, inputs: dict, output_names=None) -> list:
    """Outputs of `model` on `inputs`, in graph-output order."""
    engine = prepare(model, inputs, output_names)
    result = engine.run(inputs)
    return [result[n] for n in engine.graph.output_names]
