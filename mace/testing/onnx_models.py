"""The ONNX "light" architectures onnx ships, as reference data or with random weights.

onnx keeps nine real architectures (AlexNet ... ZFNet-512) under
onnx/backend/test/data/light with constant-valued weights (ConstantOfShape
nodes) and a reference output for the input arange(n)/n. `randomized` swaps
the constant weights for seeded random initializers so latency and similarity
numbers mean something.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")


def light_dir() -> Path:
    import onnx

    return Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"


def light_path(name: str) -> Path:
    return light_dir() / f"light_{name}.onnx"


def data_input(model):
    """(name, shape) of the one graph input that is not an initializer."""
    inits = {i.name for i in model.graph.initializer}
    vi = next(i for i in model.graph.input if i.name not in inits)
    return vi.name, [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]


def reference_input(shape) -> np.ndarray:
    """The input onnx's backend tests use for light models: arange(n)/n."""
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def reference_output(name: str) -> np.ndarray:
    import onnx
    from onnx import numpy_helper

    return numpy_helper.to_array(onnx.load_tensor(str(light_dir() / f"light_{name}_output_0.pb")))


def randomized(name: str, seed: int = 0):
    """The light model with every ConstantOfShape weight replaced by a random initializer."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(light_path(name)))
    data_name, _ = data_input(model)
    rng = np.random.default_rng(seed)
    const_shapes = {}
    for init in model.graph.initializer:
        const_shapes[init.name] = numpy_helper.to_array(init)
    keep = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape":
            keep.append(node)
            continue
        shape = [int(d) for d in const_shapes[node.input[0]].reshape(-1)]
        value = _weight(rng, node.output[0], shape)
        model.graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(keep)
    used = {t for n in keep for t in n.input}
    live = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(live)
    model.ir_version = max(model.ir_version, 4)  # initializers need not be graph inputs
    data = [i for i in model.graph.input if i.name == data_name]
    del model.graph.input[:]
    model.graph.input.extend(data)
    return model


def _weight(rng, name: str, shape) -> np.ndarray:
    # BatchNorm variances must stay positive; scales near 1 keep activations sane.
    lowered = name.lower()
    if any(k in lowered for k in ("_riv", "_var", "bn_s", "_scale", "_s_0")):
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return (rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))).astype(np.float32)
