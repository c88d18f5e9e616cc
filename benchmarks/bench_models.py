"""Models for bench_cpu.py: the ONNX "light" architectures with random weights, MobileNet v2, digits.

Each case is written to a folder (model.onnx, input.npy) by a child process, so
the parent never holds a model (its RSS would leak into the children's peak).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SEED = 0


def light_path(name: str) -> Path:
    import onnx

    return Path(os.path.dirname(onnx.__file__)) / "backend/test/data/light" / f"light_{name}.onnx"


def _consumers(graph) -> dict:
    users = {}
    for node in graph.node:
        for i, t in enumerate(node.input):
            users.setdefault(t, []).append((node, i))
    return users


def _role(tensor: str, users: dict):
    """(node, input index) that finally uses `tensor`, looking through Unsqueeze/Reshape.

    DenseNet feeds its per-channel scale through Unsqueeze and Inception v1 its
    classifier weight through Reshape; the real consumer decides the value range.
    """
    node, index = users[tensor][0]
    if node.op_type in ("Unsqueeze", "Reshape") and index == 0 and node.output[0] in users:
        return _role(node.output[0], users)
    return node, index


def _gemm_fan_in(node, shape) -> int:
    trans_b = any(a.name == "transB" and a.i for a in node.attribute)
    if len(shape) != 2:
        return int(np.prod(shape[1:]))
    return shape[1] if trans_b else shape[0]


def _random_weight(rng, shape, node, index) -> np.ndarray:
    op = node.op_type
    if (op == "BatchNormalization" and index in (1, 4)) or op == "Mul":
        # scales and variances: positive and near 1 so BatchNorm neither explodes nor divides by ~0
        return rng.uniform(0.8, 1.2, shape)
    if op == "Conv" and index == 1:
        # He scaling keeps activations O(1) through VGG's 16 convs (a flat 0.05 grows ~2x a layer)
        return rng.standard_normal(shape) * np.sqrt(2.0 / max(int(np.prod(shape[1:])), 1))
    if op == "Gemm" and index == 1:
        return rng.standard_normal(shape) * np.sqrt(2.0 / max(_gemm_fan_in(node, shape), 1))
    return rng.standard_normal(shape) * 0.05   # biases, BN means and shifts


def randomize_light(model, seed: int = SEED):
    """Replace ConstantOfShape weights by seeded random initializers; drop them from graph.input."""
    from onnx import numpy_helper

    graph = model.graph
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    users = _consumers(graph)
    rng = np.random.default_rng(seed)
    kept, new_inits = [], []
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            kept.append(node)
            continue
        shape = [int(d) for d in values[node.input[0]].reshape(-1)]
        user, index = _role(node.output[0], users)
        weight = _random_weight(rng, shape, user, index).astype(np.float32)
        new_inits.append(numpy_helper.from_array(weight, node.output[0]))
    used = {t for node in kept for t in node.input}
    inits = [t for t in graph.initializer if t.name in used] + new_inits
    init_names = {t.name for t in inits}
    # The true input is the one graph input that never was an initializer nor a weight.
    data_inputs = [v for v in graph.input if v.name not in values and v.name not in init_names]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(inits)
    del graph.input[:]
    graph.input.extend(data_inputs)
    model.ir_version = max(model.ir_version, 4)  # IR >= 4: initializers need not be inputs
    return model


def expose_logits(model) -> None:
    """Add each Softmax output's input as an extra graph output.

    Several randomized nets end in a saturated (one-hot) softmax, which would hide a wrong
    layer from the error check; the logits do not. Costs one 1000-float copy per run.
    """
    from onnx import TensorProto, helper

    producers = {o: n for n in model.graph.node for o in n.output}
    names = {o.name for o in model.graph.output}
    for out in list(model.graph.output):
        node = producers.get(out.name)
        if node is not None and node.op_type == "Softmax" and node.input[0] not in names:
            model.graph.output.append(
                helper.make_tensor_value_info(node.input[0], TensorProto.FLOAT, None))
            names.add(node.input[0])


def _data_input(model):
    vi = model.graph.input[0]
    return vi.name, [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]


def build_case(name: str, workdir: Path) -> dict:
    """Write the model and its input under workdir; returns what a child needs to run it."""
    import onnx

    if name == "digits":
        model = onnx.load(str(REPO / "examples/digits/digits_cnn.onnx"))
        # A real held-out test image, already NCHW (1,1,8,8) as the .onnx expects.
        x = np.load(REPO / "examples/digits/test_set.npz")["images"][:1].astype(np.float32)
    elif name == "mobilenet_v2":
        from mace.testing.mobilenet_v2 import mobilenet_v2

        model = mobilenet_v2(seed=SEED)
        _, shape = _data_input(model)
        x = np.random.default_rng(SEED + 1).standard_normal(shape).astype(np.float32)
    else:
        model = randomize_light(onnx.load(str(light_path(name))))
        _, shape = _data_input(model)
        x = np.random.default_rng(SEED + 1).standard_normal(shape).astype(np.float32)
    expose_logits(model)
    input_name, _ = _data_input(model)
    case_dir = workdir / name
    case_dir.mkdir(parents=True)
    onnx.save(model, str(case_dir / "model.onnx"))
    np.save(case_dir / "input.npy", x)
    return {"name": name, "dir": str(case_dir), "model": str(case_dir / "model.onnx"),
            "input": str(case_dir / "input.npy"), "input_name": input_name}


