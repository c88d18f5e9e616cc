"""TF1 while loops (tf.map_fn, tf.compat.v1.while_loop, TensorArrays) whose trip count is static
are unrolled while converting (mace/frontends/tensorflow/unroll.py), compared with TensorFlow on
TF1 graphs built here; loops whose trip count depends on the data are refused naming the loop."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from mace.errors import ModelError
from mace.frontends.tensorflow.unroll import unroll_loops
from mace.runtime.engine import Engine
from tests.tensorflow.tf_case import convert_pb, op_types, rand, save_pb, tf
from mace.validate.reference import run_tensorflow


def v1_graph(build):
    """GraphDef of `build()` under TF1 control flow (Enter/Merge/Switch/Exit, TensorArrayV3)."""
    tf.compat.v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g:
            outputs = build()
        return g.as_graph_def(), [t.name for t in outputs]
    finally:
        tf.compat.v1.enable_control_flow_v2()


def compare(graph_def, outputs, inputs):
    """Our engine against TensorFlow on the original graph; returns our outputs."""
    assert {"Enter", "LoopCond"} <= op_types(graph_def)
    with tempfile.TemporaryDirectory() as tmp:
        path = save_pb(Path(tmp) / "model.pb", graph_def)
        expected = run_tensorflow(path, inputs, outputs)
        graph = convert_pb(path, inputs, outputs)
    got = Engine(graph).run(inputs)
    for name in outputs:
        np.testing.assert_allclose(got[name], np.asarray(expected[name]), rtol=1e-5, atol=1e-6, err_msg=name)
    return got


def map_fn_model():
    x = tf.compat.v1.placeholder(tf.float32, (None, 5, 3), name="x")
    w = tf.constant(rand(3, 4, seed=1))

    def row(r):   # per batch row: a matmul, a reduction over rows, and a second output
        y = tf.nn.relu(tf.matmul(r, w))
        return y, tf.reduce_max(y, axis=0)
    y, top = tf.map_fn(row, x, dtype=(tf.float32, tf.float32))
    return [tf.identity(y, name="y"), tf.identity(top, name="top")]


@pytest.mark.parametrize("batch", [1, 3])
def test_map_fn_over_the_batch_is_unrolled(batch):
    graph_def, outputs = v1_graph(map_fn_model)
    assert {"TensorArrayV3", "TensorArrayScatterV3", "TensorArrayReadV3", "TensorArrayWriteV3",
            "TensorArrayGatherV3"} <= op_types(graph_def)
    compare(graph_def, outputs, {"x": rand(batch, 5, 3, seed=batch)})


def counter_model():
    x = tf.compat.v1.placeholder(tf.float32, (4,), name="x")
    n = tf.shape(x)[0] - 1   # 3 trips: from the input's shape, not its values

    def body(i, acc, ta):
        acc = acc * 0.5 + tf.cast(i, tf.float32)
        return i + 1, acc, ta.write(i, acc * x)
    _, acc, ta = tf.compat.v1.while_loop(lambda i, acc, ta: i < n, body,
                                         [tf.constant(0), x, tf.TensorArray(tf.float32, size=n, clear_after_read=False)])
    return [tf.identity(acc, name="acc"), tf.identity(ta.stack(), name="stacked"),
            tf.identity(ta.size(), name="count"), tf.identity(ta.read(1), name="second")]


def test_while_loop_with_a_trip_count_from_a_shape_and_a_tensor_array():
    graph_def, outputs = v1_graph(counter_model)
    got = compare(graph_def, outputs, {"x": rand(4, seed=5)})
    assert got["stacked:0"].shape == (3, 4) and int(got["count:0"]) == 3


def test_the_rewritten_graph_runs_in_tensorflow_as_the_original():
    graph_def, outputs = v1_graph(counter_model)
    x = rand(4, seed=6)
    new = unroll_loops(tf, graph_def, {"x:0": ((4,), np.float32)}, "model.pb", [n.name for n in graph_def.node])
    assert not op_types(new) & {"Enter", "Exit", "Merge", "Switch", "LoopCond", "NextIteration", "TensorArrayV3"}
    results = []
    for gd in (graph_def, new):
        with tf.Graph().as_default() as g:
            tf.compat.v1.import_graph_def(gd, name="")
            with tf.compat.v1.Session(graph=g) as sess:
                results.append(sess.run(outputs, {"x:0": x}))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_a_trip_count_from_the_data_is_refused_naming_the_loop():
    def build():
        x = tf.compat.v1.placeholder(tf.float32, (4,), name="x")
        _, s = tf.compat.v1.while_loop(lambda i, s: s < tf.reduce_sum(x), lambda i, s: (i + 1, s + 1.0),
                                       [tf.constant(0), tf.constant(0.0)], name="grow")
        return [tf.identity(s, name="s")]
    graph_def, outputs = v1_graph(build)
    with tempfile.TemporaryDirectory() as tmp:
        path = save_pb(Path(tmp) / "model.pb", graph_def)
        with pytest.raises(ModelError, match=r"loop 'grow/while_context'.*input 'x'"):
            convert_pb(path, {"x": rand(4)}, outputs)
