"""fold_channel_shuffle + the ChannelShuffle op: ShuffleNet's Reshape/Transpose shuffle becomes one
op with onnxruntime's results; other Reshape/Transpose chains are left alone."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace.onnx_backend import prepare
from mace.testing.onnx_models import data_input, randomized


def ort_run(model, feed):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)[0]


def shuffle_block(c=12, g=3, hw=5, split=None, perm=(0, 2, 1, 3, 4)):
    """Conv -> Reshape(split) -> Transpose(perm) -> Reshape(N, C, H, W) -> Conv, as ONNX writes it."""
    rng = np.random.default_rng(0)
    split = split or [1, g, c // g, hw, hw]
    inits = [numpy_helper.from_array(rng.standard_normal((c, c, 1, 1)).astype(np.float32), n)
             for n in ("w1", "w2")]
    inits += [numpy_helper.from_array(np.array(s, np.int64), n)
              for n, s in (("split", split), ("merged", [0, c, hw, hw]))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]),
             helper.make_node("Reshape", ["a", "split"], ["b"]),
             helper.make_node("Transpose", ["b"], ["t"], perm=list(perm)),
             helper.make_node("Reshape", ["t", "merged"], ["m"]),
             helper.make_node("Conv", ["m", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "shuffle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def run_both(model, options=None):
    name = model.graph.input[0].name
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    engine = prepare(model, {name: x}, options=options)
    got = engine.run({name: x})[model.graph.output[0].name]
    return got, ort_run(model, {name: x}), [n.op.type for n in engine.nodes]


@pytest.mark.parametrize("c,g", [(12, 3), (12, 4), (16, 8), (6, 2)])
def test_shuffle_block_becomes_one_op_and_matches_onnxruntime(c, g):
    got, want, types = run_both(shuffle_block(c, g))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert types == ["Transpose", "Conv2D", "ChannelShuffle", "Conv2D", "Transpose"]


def test_other_transposes_of_the_split_are_left_alone():
    # swapping the spatial axes instead of the groups is no channel shuffle
    got, want, types = run_both(shuffle_block(perm=(0, 1, 2, 4, 3)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "ChannelShuffle" not in types and types.count("Reshape") == 2


def test_split_across_height_is_left_alone():
    # (N, C, 2, 3, W): the split takes H apart, not the channels
    got, want, types = run_both(shuffle_block(c=4, hw=6, split=[1, 4, 2, 3, 6]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "ChannelShuffle" not in types


def test_shufflenet_matches_onnxruntime_with_fewer_ops():
    model = randomized("shufflenet", seed=2)
    name, shape = data_input(model)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    want = ort_run(model, {name: x})
    out = model.graph.output[0].name
    folded = prepare(model, {name: x})
    plain = prepare(model, {name: x}, options={"skip_passes": ["fold_channel_shuffle"]})
    got = folded.run({name: x})[out]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    np.testing.assert_array_equal(got, plain.run({name: x})[out])   # a pure permutation: bit-exact
    types = [n.op.type for n in folded.nodes]
    assert types.count("ChannelShuffle") == 16
    assert len(plain.nodes) - len(folded.nodes) == 16 * 4


def test_quantized_shuffle_passes_uint8_through():
    from mace.ops.channel_shuffle import source_channels
    from tests.ops.ir_graph import make_graph, run_graph
    from tests.quantize.qcase import kernel_tags, output_step, quantize_and_run, within_steps
    x = np.random.default_rng(4).uniform(-1, 1, (1, 3, 3, 8)).astype(np.float32)
    graph = make_graph(x.shape, [("ChannelShuffle", ["x"], ["y"], {"group": 2})])
    out, _ = run_graph(graph, x)
    np.testing.assert_array_equal(out["y"], x[..., source_channels(8, 2)])
    ref, quant, qgraph = quantize_and_run(make_graph(x.shape, [("ChannelShuffle", ["x"], ["y"], {"group": 2})]),
                                          {"x": x})
    assert kernel_tags(qgraph)["ChannelShuffle"].startswith("int8")
    assert within_steps(ref["y"], quant["y"], output_step(qgraph, "y"))


@pytest.mark.parametrize("shape,g", [((1, 5, 7, 12), 3), ((2, 3, 3, 16), 4), ((1, 4, 4, 6), 2)])
def test_gpu_kernel_matches_the_cpu_one(shape, g):
    from tests.gpu.gpu_case import check_op, require_gpu
    require_gpu()
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    check_op("ChannelShuffle", {"x": x}, group=g)
