"""Frontends: read a framework's model file and build a Graph in that framework's layout.

`FRONTENDS` maps a deployment file's `platform` to its converter; frontends
never know about runtimes. Each returns a Graph whose inputs/outputs follow
the deployment file's names, shapes and data formats.
"""
from __future__ import annotations

import importlib

from mace.errors import ConfigError
from mace.ir.graph import Graph

FRONTENDS = {
    "onnx": "mace.frontends.onnx.frontend",
    "tensorflow": "mace.frontends.tensorflow.frontend",
    "keras": "mace.frontends.tensorflow.frontend",   # MACE's platform name for Keras files (.h5, .keras)
    "caffe": "mace.frontends.caffe.frontend",
    "tflite": "mace.frontends.tflite.frontend",
}

# The layout each framework's 4-D tensors use (validation moves data between it and the caller's).
FRAMEWORK_FORMATS = {"onnx": "NCHW", "caffe": "NCHW", "tensorflow": "NHWC", "tflite": "NHWC", "keras": "NHWC",
                     "pytorch": "NCHW", "megengine": "NCHW"}


def convert(platform: str, spec) -> Graph:
    """Convert the model described by `spec` (a frontends.base.ModelSpec)."""
    try:
        module = importlib.import_module(FRONTENDS[platform])
    except KeyError:
        raise ConfigError(f"platform '{platform}' has no frontend yet; "
                          f"available: {', '.join(sorted(FRONTENDS))}") from None
    return module.convert(spec)
