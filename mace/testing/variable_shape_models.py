"""Small ONNX models with symbolic input dimensions, built with onnx.helper: the test models of
variable input shapes (input_shapes: -1..8,...; docs/deployment_file.md).

`classifier`: a CNN with a symbolic batch N (conv, pooling, Flatten, Gemm, Softmax).
`detector`: conv heads over a symbolic H x W, NonMaxSuppression over every cell inside the graph.
`encoder`: a transformer-encoder block over a symbolic sequence S, its head split and merge
written the way PyTorch exports them (Shape -> Gather -> Concat -> Reshape) and as literal
targets with 0 / -1; `positions=True` adds a learned position table sliced to S (Shape ->
Slice), `mask=True` an attention-mask input sharing S, `length_scale=True` a division by S
(which no converted model can follow).
"""
from __future__ import annotations

import numpy as np


def _init(rng, name, *shape, scale=0.2):
    from onnx import numpy_helper

    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _ints(name, values):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(values, np.int64), name)


def classifier(seed: int = 0, size: int = 16, classes: int = 10):
    """ModelProto: x [N, 3, size, size] -> prob [N, classes]."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    inits = [_init(rng, "w1", 8, 3, 3, 3), _init(rng, "b1", 8), _init(rng, "w2", 16, 8, 3, 3),
             _init(rng, "b2", 16), _init(rng, "fc_w", classes, 16), _init(rng, "fc_b", classes)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def encoder(seed: int = 0, width: int = 32, heads: int = 4, positions: bool = False, max_len: int = 64,
            mask: bool = False, length_scale: bool = False):
    """ModelProto: x [1, S, width] -> y [1, S, width], one pre-norm encoder block. `mask`: a second
    input mask [1, S] (1 keeps a position) added to the attention scores as BERT does;
    `length_scale`: x divided by S (Shape -> Cast), a number no converted model can follow."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    d = width // heads
    inits = [_init(rng, n, width, width) for n in ("wq", "wk", "wv", "wo")] + [
        _init(rng, "w_up", width, 2 * width), _init(rng, "w_down", 2 * width, width),
        _init(rng, "ln_g", width, scale=1.0), _init(rng, "ln_b", width),
        _init(rng, "pos", max_len, width),
        _ints("zero", [0]), _ints("one", [1]), _ints("heads_d", [heads, d]), _ints("width", [width]),
        _ints("split_literal", [0, 0, heads, d]), _ints("merge_literal", [1, -1, width]),
        helper.make_tensor("scale", TensorProto.FLOAT, [], [float(np.sqrt(d))]),
        helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]),
        helper.make_tensor("sqrt2", TensorProto.FLOAT, [], [float(np.sqrt(2.0))]),
        helper.make_tensor("unit", TensorProto.FLOAT, [], [1.0]),
    ]
    nodes = []

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, **attrs))

    src = "x"
    if length_scale:
        node("Shape", ["x"], ["x_dims"])
        node("Gather", ["x_dims", "one"], ["length"], axis=0)
        node("Cast", ["length"], ["length_f"], to=TensorProto.FLOAT)
        node("Div", ["x", "length_f"], ["x_scaled"], name="scale_by_length")
        src = "x_scaled"
    if positions:   # x + pos[:S]: the slice end comes from x's shape
        node("Shape", ["x"], ["x_shape"])
        node("Gather", ["x_shape", "one"], ["seq"], axis=0)
        node("Slice", ["pos", "zero", "seq", "zero"], ["pos_s"])
        node("Add", ["x", "pos_s"], ["x_pos"])
        src = "x_pos"
    node("LayerNormalization", [src, "ln_g", "ln_b"], ["h"], axis=-1, epsilon=1e-5)
    # head split as PyTorch exports it: Reshape(q, concat(shape(q)[0:2], [heads, d]))
    node("Shape", ["h"], ["h_shape"])
    node("Slice", ["h_shape", "zero", _ints_name(inits, "two", [2]), "zero"], ["bs"])
    node("Concat", ["bs", "heads_d"], ["split_shape"], axis=0)
    for name in ("q", "k", "v"):
        node("MatMul", ["h", f"w{name}"], [f"{name}_flat"])
        shape = "split_shape" if name != "v" else "split_literal"
        node("Reshape", [f"{name}_flat", shape], [f"{name}_split"])
        node("Transpose", [f"{name}_split"], [f"{name}_heads"], perm=[0, 2, 1, 3])
    node("Transpose", ["k_heads"], ["k_t"], perm=[0, 1, 3, 2])
    node("MatMul", ["q_heads", "k_t"], ["scores_raw"])
    node("Div", ["scores_raw", "scale"], ["scores"])
    if mask:   # (1 - mask) * -10000 as [1, 1, 1, S]: BERT's extended attention mask
        inits.append(_ints("mask_axes", [1, 2]))
        inits.append(helper.make_tensor("big", TensorProto.FLOAT, [], [-10000.0]))
        node("Unsqueeze", ["mask", "mask_axes"], ["mask_4d"])
        node("Cast", ["mask_4d"], ["mask_f"], to=TensorProto.FLOAT)
        node("Sub", ["unit", "mask_f"], ["masked_out"])
        node("Mul", ["masked_out", "big"], ["mask_bias"])
        node("Add", ["scores", "mask_bias"], ["scores_masked"])
        node("Softmax", ["scores_masked"], ["attn"], axis=-1)
    else:
        node("Softmax", ["scores"], ["attn"], axis=-1)
    node("MatMul", ["attn", "v_heads"], ["ctx_heads"])
    node("Transpose", ["ctx_heads"], ["ctx_t"], perm=[0, 2, 1, 3])
    node("Reshape", ["ctx_t", "merge_literal"], ["ctx"])
    node("MatMul", ["ctx", "wo"], ["attn_out"])
    node("Add", [src, "attn_out"], ["res1"])
    node("MatMul", ["res1", "w_up"], ["up"])   # GELU written out (erf form)
    node("Div", ["up", "sqrt2"], ["up_s"])
    node("Erf", ["up_s"], ["up_e"])
    node("Add", ["up_e", "unit"], ["up_e1"])
    node("Mul", ["up", "up_e1"], ["up_m"])
    node("Mul", ["up_m", "half"], ["gelu"])
    node("MatMul", ["gelu", "w_down"], ["down"])
    node("Add", ["res1", "down"], ["y"])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "S", width])]
    if mask:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT64, [1, "S"]))
    graph = helper.make_graph(
        nodes, "encoder", inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "S", width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ints_name(inits: list, name: str, values) -> str:
    inits.append(_ints(name, values))
    return name


def with_symbolic_batch(model, name: str = "N"):
    """`model` (a ModelProto, changed in place and returned) with dimension 0 of its inputs and
    outputs symbolic: onnx's light architectures declare batch 1."""
    inits = {i.name for i in model.graph.initializer}
    for vi in [i for i in model.graph.input if i.name not in inits] + list(model.graph.output):
        dim = vi.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = name
    return model


def detector(seed: int = 0, classes: int = 3, limit: int = 10):
    """ModelProto: x [1, 3, H, W] (H, W symbolic) -> a box and a class-score map per cell of a
    stride-4 grid, NonMaxSuppression over every cell, the kept boxes gathered: selected [n, 3],
    picked [n, 4]. Its reshapes are literal targets with -1 (the cells follow H and W)."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    inits = [_init(rng, "w1", 8, 3, 3, 3), _init(rng, "w_box", 4, 8, 1, 1), _init(rng, "w_cls", classes, 8, 1, 1),
             _ints("box_shape", [1, 4, -1]), _ints("cls_shape", [1, classes, -1]), _ints("limit", [limit]),
             helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.3]),
             helper.make_tensor("score", TensorProto.FLOAT, [1], [0.55]),
             helper.make_tensor("two", TensorProto.INT64, [], [2]),
             helper.make_tensor("zero", TensorProto.INT64, [], [0])]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[4, 4]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w_box"], ["box_map"]),
        helper.make_node("Sigmoid", ["box_map"], ["box_unit"]),
        helper.make_node("Reshape", ["box_unit", "box_shape"], ["box_cols"]),
        helper.make_node("Transpose", ["box_cols"], ["boxes"], perm=[0, 2, 1]),
        helper.make_node("Conv", ["r1", "w_cls"], ["cls_map"]),
        helper.make_node("Sigmoid", ["cls_map"], ["cls_unit"]),
        helper.make_node("Reshape", ["cls_unit", "cls_shape"], ["scores"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou", "score"], ["selected"]),
        helper.make_node("Gather", ["selected", "two"], ["cell"], axis=1),
        helper.make_node("Gather", ["boxes", "zero"], ["boxes0"], axis=0),
        helper.make_node("Gather", ["boxes0", "cell"], ["picked"], axis=0),
    ]
    graph = helper.make_graph(
        nodes, "detector", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["n", 3]),
         helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["n", 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
