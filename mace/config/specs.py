"""What a model's inputs and outputs are, as the deployment file says: shared by config, the frontends
(what to convert), placement (group boundaries) and validation (framework layouts)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TensorSpec:
    name: str
    shape: tuple | None = None      # in `data_format`
    data_format: str = "NHWC"       # NHWC | NCHW | NONE: the caller's layout
    dtype: str = "float32"
    value_range: tuple = (-1.0, 1.0)
    image: object = None            # config.images.ImagePreprocess when the input takes JPEG/PNG files
    # {dim: (low, high or None)} of `shape` (caller's layout) that may change at run time
    # (input_shapes: -1..8,...); `shape` holds the values the model is converted at
    dim_ranges: dict = field(default_factory=dict)


@dataclass
class ModelSpec:
    model_path: Path
    inputs: list = field(default_factory=list)    # TensorSpec
    outputs: list = field(default_factory=list)   # TensorSpec
    weight_path: Path | None = None               # Caffe weights
    name: str = "model"


def user_to_framework(shape, user_fmt: str, fw_fmt: str):
    """Permutation taking a caller-layout 4-D tensor to the framework's layout (or None)."""
    if shape is None or len(shape) != 4 or user_fmt == "NONE" or user_fmt == fw_fmt:
        return None
    return (0, 3, 1, 2) if user_fmt == "NHWC" else (0, 2, 3, 1)
