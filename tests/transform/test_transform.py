"""Transformer passes: each one's effect on the op list, and numbers unchanged vs onnxruntime."""
import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from mace import onnx_backend
from mace.frontends import convert
from mace.config.specs import ModelSpec, TensorSpec
from mace.ir.args import get_arg
from mace.transform.pipeline import PASSES, pass_names, transform


def _model(nodes, inits, x_shape, outputs):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _w(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.3


def _check(model, x, options=None):
    engine = onnx_backend.prepare(model, {"x": x}, options=options)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = engine.run({"x": x})
    for o, r in zip(engine.graph.output_names, ref):
        np.testing.assert_allclose(got[o], r, rtol=1e-4, atol=1e-5)
    return [op.type for op in engine.graph.net.op], engine


def test_batchnorm_and_relu_fold_into_conv():
    c = 4
    inits = {"w": _w(c, 3, 3, 3), "s": _w(c, seed=1) + 1, "b": _w(c, seed=2), "m": _w(c, seed=3),
             "v": np.abs(_w(c, seed=4)) + 0.5}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["y"])]
    x = _w(1, 3, 8, 8, seed=5)
    types, engine = _check(_model(nodes, inits, [1, 3, 8, 8], ["y"]), x)
    assert types.count("Conv2D") == 1 and "BatchNorm" not in types and "Activation" not in types
    conv = next(op for op in engine.graph.net.op if op.type == "Conv2D")
    assert get_arg(conv, "activation") == "RELU"
    assert {"Conv_c", "BatchNormalization_bn", "Relu_y"} <= set(conv.framework_op)


def test_caffe2_style_mul_add_fold_into_conv():
    inits = {"w": _w(6, 3, 1, 1), "s": _w(1, 6, 1, 1, seed=1), "b": _w(6, 1, 1, seed=2)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Mul", ["c", "s"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])]
    types, _ = _check(_model(nodes, inits, [1, 3, 5, 5], ["y"]), _w(1, 3, 5, 5, seed=3))
    assert "Eltwise" not in types


def test_layout_pass_keeps_conv_chains_nhwc_and_transposes_only_at_the_edges():
    inits = {"w1": _w(8, 3, 3, 3), "w2": _w(8, 8, 3, 3, seed=1), "w3": _w(8, 8, 1, 1, seed=2),
             "fc": _w(4 * 4, 5, seed=3)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["ar", "w2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["ar", "w3"], ["c"]),
             helper.make_node("Add", ["b", "c"], ["s"]),            # residual: stays NHWC
             helper.make_node("Concat", ["s", "b"], ["cat"], axis=1),  # axis remapped to channels
             helper.make_node("MaxPool", ["cat"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Identity", ["p"], ["q"]),
             helper.make_node("ReduceMean", ["q"], ["r"], axes=[1], keepdims=1),
             helper.make_node("Flatten", ["r"], ["f"]),               # needs NCHW order again
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    types, engine = _check(_model(nodes, inits, [1, 3, 8, 8], ["y"]), _w(1, 3, 8, 8, seed=4))
    # one transpose into NHWC at the input; none between convs, and none before Flatten
    # (fold_flatten_transpose permutes the MatMul weight instead)
    assert types.count("Transpose") == 1 and types[0] == "Transpose", types
    concat = next(op for op in engine.graph.net.op if op.type == "Concat")
    assert get_arg(concat, "axis") == 3


def test_nhwc_interface_needs_no_transpose_at_the_input():
    inits = {"w": _w(4, 3, 3, 3)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])]
    model = _model(nodes, inits, [1, 3, 6, 6], ["y"])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        onnx.save(model, path)
        graph = convert("onnx", ModelSpec(path, [TensorSpec("x", (1, 6, 6, 3), "NHWC")],
                                          [TensorSpec("y", None, "NHWC")]))
    transform(graph)
    assert [op.type for op in graph.net.op] == ["Conv2D"]


def test_constant_subgraphs_fold_and_dead_ops_go():
    shape_chain = [helper.make_node("Shape", ["x"], ["sh"]),
                   helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
                   helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
                   helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
                   helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
             "minus1": np.array([-1], np.int64)}
    types, _ = _check(_model(shape_chain, inits, [2, 3, 4, 5], ["y"]), _w(2, 3, 4, 5))
    assert types == ["Reshape"]


def test_pass_list_is_the_single_source_of_truth(tmp_path):
    names = pass_names()
    assert names == [p.name for p in PASSES] and len(set(names)) == len(names)
    inits = {"w": _w(4, 3, 3, 3)}
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
                   inits, [1, 3, 6, 6], ["y"])
    engine = onnx_backend.prepare(model, {"x": _w(1, 3, 6, 6)}, options={"skip_passes": ["fuse_activation"]})
    assert "Activation" in [op.type for op in engine.graph.net.op]
