"""The TensorFlow frontend's contract with the deployment file: tensor names with or without
':N', cutting the graph at inner tensors, layouts, and errors that name the node, tensor or
op at fault (unsupported ops listed with the supported ones)."""
from pathlib import Path

import numpy as np
import pytest
import yaml

from mace.errors import ConfigError, ModelError, UnsupportedOpError
from mace.runtime.engine import Engine
from mace.validate.reference import run_tensorflow
from tests.cli_helpers import cli, sha256
from tests.tensorflow.tf_case import convert_pb, freeze, rand, save_pb, tf


def conv_relu_split(x):
    w = tf.constant(rand(3, 3, 2, 4, seed=1))
    y = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME", name="conv"), name="relu")
    a, b = tf.split(y, 2, axis=-1, name="split")
    return tf.identity(a * 2.0, name="out_a"), tf.identity(b, name="out_b")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    graph_def, _ = freeze(conv_relu_split, {"x": rand(1, 6, 6, 2)})
    return save_pb(tmp_path_factory.mktemp("tf") / "model.pb", graph_def)


def run_ours(path, inputs, outputs):
    graph = convert_pb(path, inputs, outputs)
    return Engine(graph).run(inputs), graph


@pytest.mark.parametrize("inp,outs", [("x", ["out_a", "out_b"]), ("x:0", ["out_a:0", "split:1"]),
                                      ("x", ["relu", "split:0"])])
def test_names_with_and_without_index(model, inp, outs):
    x = rand(1, 6, 6, 2, seed=3)
    got, _ = run_ours(model, {inp: x}, outs)
    ref = run_tensorflow(model, {inp: x}, outs)
    assert sorted(got) == sorted(outs)
    for name in outs:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6)


def test_graph_cut_at_an_inner_tensor(model):
    y = rand(1, 6, 6, 4, seed=5)
    got, graph = run_ours(model, {"relu:0": y}, ["out_a"])
    assert [op.type for op in graph.net.op] == ["Split", "Eltwise"]  # nothing before the cut
    np.testing.assert_allclose(got["out_a"], y[..., :2] * 2.0, rtol=1e-6)


def test_unknown_input_lists_placeholders(model):
    with pytest.raises(ModelError, match=r"input tensor 'image' is not in the model; "
                                         r"its placeholders are \['x'\]"):
        convert_pb(model, {"image": rand(1, 6, 6, 2)}, ["out_a"])


def test_unknown_output_lists_outputs(model):
    # frozen functions end in Identity nodes, one per returned tensor
    with pytest.raises(ModelError, match=r"output tensor 'prob' is not in the model; its outputs are "
                                         r"\['Identity', 'Identity_1'\]"):
        convert_pb(model, {"x": rand(1, 6, 6, 2)}, ["prob"])


def test_shape_against_placeholder(model):
    with pytest.raises(ModelError, match=r"input tensor 'x': shape \[1, 2, 6, 6\] \(NONE\).*declares "
                                         r"\[1, 6, 6, 2\]"):
        convert_pb(model, {"x": rand(1, 2, 6, 6)}, ["out_a"])


def test_dtype_against_placeholder(model):
    with pytest.raises(ModelError, match="input tensor 'x' is float32 in the model.*int32"):
        convert_pb(model, {"x": np.zeros((1, 6, 6, 2), np.int32)}, ["out_a"])


def test_unlisted_placeholder_is_named(tmp_path):
    graph_def, _ = freeze(lambda x, y: x + y, {"x": rand(2, 3), "y": rand(2, 3)})
    path = save_pb(tmp_path / "m.pb", graph_def)
    with pytest.raises(ModelError, match="Placeholder 'y': the outputs depend on this placeholder"):
        convert_pb(path, {"x": rand(2, 3)}, ["Identity"])


def test_a_constant_with_a_negative_dim_is_named(tmp_path):
    graph_def, _ = freeze(lambda x: x + tf.constant(np.ones((2, 3), np.float32), name="c"), {"x": rand(2, 3)})
    const = next(n for n in graph_def.node if n.op == "Const" and n.attr["value"].tensor.tensor_shape.dim)
    const.attr["value"].tensor.tensor_shape.dim[1].size = -3
    path = save_pb(tmp_path / "m.pb", graph_def)
    with pytest.raises(ModelError, match=f"node '{const.name}' \\(Const\\): a constant tensor declares shape "
                                         f"\\[2, -3\\]"):
        convert_pb(path, {"x": rand(2, 3)}, ["Identity"])


def cumsum_model(x):
    return tf.raw_ops.Cumsum(x=tf.nn.relu(x), axis=1, name="running_total") + 1.0


def test_unsupported_op_names_type_node_and_supported_list(tmp_path):
    graph_def, _ = freeze(cumsum_model, {"x": rand(2, 5)})
    path = save_pb(tmp_path / "m.pb", graph_def)
    with pytest.raises(UnsupportedOpError) as err:
        convert_pb(path, {"x": rand(2, 5)}, ["Identity"])
    msg = str(err.value)
    assert "unsupported TensorFlow op(s): Cumsum (node running_total)" in msg
    assert "Supported: " in msg and "Conv2D" in msg and "StridedSlice" in msg


def test_unsupported_op_outside_the_needed_graph_is_ignored(tmp_path):
    graph_def, _ = freeze(lambda x: (tf.nn.relu(x, name="r"), tf.raw_ops.Cumsum(x=x, axis=0)),
                          {"x": rand(2, 5)})
    path = save_pb(tmp_path / "m.pb", graph_def)
    assert "Cumsum" in {n.op for n in graph_def.node}
    got, _ = run_ours(path, {"x": rand(2, 5)}, ["r"])
    np.testing.assert_array_equal(got["r"], np.maximum(rand(2, 5), 0))


def test_unsupported_second_output_is_named(tmp_path):
    def f(x):
        y, mean, *_ = tf.raw_ops.FusedBatchNormV3(x=x, scale=rand(2), offset=rand(2), mean=rand(2),
                                                  variance=rand(2, low=0.5), is_training=False, name="bn")
        return y + tf.reduce_sum(mean)
    graph_def, _ = freeze(f, {"x": rand(1, 3, 3, 2)})
    path = save_pb(tmp_path / "m.pb", graph_def)
    with pytest.raises(ModelError, match="FusedBatchNormV3 'bn': output bn:1 is used"):
        convert_pb(path, {"x": rand(1, 3, 3, 2)}, ["Identity"])


def test_not_a_graph_def(tmp_path):
    path = tmp_path / "m.pb"
    path.write_bytes(b"\x00\x01not a graph")
    with pytest.raises(ModelError, match="not a TensorFlow GraphDef"):
        convert_pb(path, {"x": rand(1)}, ["y"])


def deploy(work: Path, path: Path, checksum: str, **subgraph) -> Path:
    sg = {"input_tensors": "x", "input_shapes": "1,6,6,2", "output_tensors": "out_a,split:1", **subgraph}
    cfg = work / "deploy.yml"
    cfg.write_text(yaml.safe_dump({"library_name": "tfcli", "models": {"m": {
        "platform": "tensorflow", "model_file_path": str(path), "model_sha256_checksum": checksum,
        "subgraphs": [sg], "runtime": "cpu"}}}))
    return cfg


def test_cli_nchw_io_validates(model, tmp_path):
    cfg = deploy(tmp_path, model, sha256(model), input_shapes="1,2,6,6", input_data_formats="NCHW",
                 output_data_formats="NCHW", output_shapes="1,2,6,6;1,2,6,6".split(";"))
    conv = cli("convert", f"--config={cfg}", cwd=tmp_path)
    assert conv.returncode == 0, conv.stderr
    run = cli("run", f"--config={cfg}", "--validate", cwd=tmp_path)
    assert run.returncode == 0 and "PASS" in run.stdout and "FAIL" not in run.stdout, run.stdout + run.stderr


def test_cli_unsupported_op_exits_1(tmp_path):
    graph_def, _ = freeze(cumsum_model, {"x": rand(2, 5)})
    path = save_pb(tmp_path / "m.pb", graph_def)
    cfg = deploy(tmp_path, path, sha256(path), input_shapes="2,5", input_data_formats="NONE",
                 output_tensors="Identity", output_data_formats="NONE")
    conv = cli("convert", f"--config={cfg}", cwd=tmp_path)
    assert conv.returncode == 1
    assert "Cumsum (node running_total)" in conv.stderr and "Traceback" not in conv.stderr


def test_saved_model_checksum_covers_every_file(tmp_path):
    from mace.config.fetch import fetch, sha256_of
    from mace.errors import ChecksumError

    module = tf.Module()
    module.f = tf.function(lambda x: x * 2.0, input_signature=[tf.TensorSpec([2], tf.float32, name="x")])
    saved = tmp_path / "sm"
    tf.saved_model.save(module, str(saved))
    checksum = sha256_of(saved)
    yml = tmp_path / "d.yml"
    key = "models.m.model_file_path"
    assert fetch(str(saved), checksum, key, yml, tmp_path, allow_dir=True) == saved
    with pytest.raises(ConfigError, match="not a regular file"):  # other platforms take files only
        fetch(str(saved), checksum, key, yml, tmp_path)
    (saved / "variables" / "extra.txt").write_text("changed")
    with pytest.raises(ChecksumError, match="sha256 mismatch"):
        fetch(str(saved), checksum, key, yml, tmp_path, allow_dir=True)
