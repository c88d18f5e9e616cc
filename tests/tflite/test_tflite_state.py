"""Stateful streaming TFLite models (issue 34, item 3): resource variables (VAR_HANDLE,
READ_VARIABLE, ASSIGN_VARIABLE, initial values from CALL_ONCE's subgraph) kept by the engine
between runs, `engine.reset_state()`, and `run --validate` over a sequence against LiteRT run
over the same sequence in one interpreter."""
import numpy as np
import pytest

from mace.config.specs import ModelSpec, TensorSpec
from mace.frontends import convert
from mace.runtime.engine import Engine
from mace.transform.pipeline import transform
from mace.validate.reference import run_litert_sequence
from tests.cli_helpers import cli, sha256, write_deployment
from tests.tflite.tfl_case import io_names, op_types, rand, tf

W = tf.constant(rand(8, 5, seed=1))


class RingBuffer(tf.Module):
    """A streaming front end: the last 4 frames in a variable, a frame in, features out; a
    step counter in a second variable, and a read-only gain (a variable never assigned)."""

    def __init__(self):
        self.frames = tf.Variable(tf.constant(rand(1, 4, 8, seed=2) * 0.1), name="frames")
        self.count = tf.Variable(tf.zeros((1, 1)), name="count")
        self.gain = tf.Variable(tf.constant([[1.5]]), name="gain")

    @tf.function(input_signature=[tf.TensorSpec((1, 8), tf.float32, name="x0")])
    def __call__(self, x):
        frames = tf.concat([self.frames[:, 1:], x[:, None, :]], axis=1)
        self.frames.assign(frames)
        self.count.assign(self.count + 1.0)
        features = tf.reduce_mean(tf.tanh(tf.matmul(frames, W)), axis=1)
        return features * self.gain + self.count * 0.01


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    module = RingBuffer()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    conv.experimental_enable_resource_variables = True
    path = tmp_path_factory.mktemp("state") / "ring.tflite"
    path.write_bytes(conv.convert())
    assert {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"} <= op_types(path)
    return path


def engine_for(path):
    ins, outs = io_names(path)
    graph = convert("tflite", ModelSpec(path, [TensorSpec(ins[0], (1, 8), "NONE")], [TensorSpec(outs[0], None, "NONE")]))
    transform(graph, {"runtime": "cpu"})
    return Engine(graph), ins[0], outs[0]


def test_state_carries_between_runs_as_in_litert(stream):
    engine, x, y = engine_for(stream)
    sequence = [{x: rand(1, 8, seed=10 + k)} for k in range(6)]
    want = [r[y] for r in run_litert_sequence(stream, sequence, [y])]
    got = [engine.run(feed)[y] for feed in sequence]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"step {k}")
    assert not np.allclose(got[0], got[1])   # the state did change the answer
    engine.reset_state()   # back to the initial state: the sequence gives the same answers again
    again = [engine.run(feed)[y] for feed in sequence]
    for g, a in zip(got, again):
        np.testing.assert_array_equal(g, a)


def test_only_assigned_variables_are_state(stream):
    engine, _, _ = engine_for(stream)
    kinds = [op.type for op in engine.graph.net.op]
    assert kinds.count("AssignVariable") == 2 and kinds.count("ReadVariable") == 2   # gain is a constant
    assert sorted(engine.variables.initial) == ["count", "frames"]


def _converted(stream, tmp_path) -> tuple:
    """The stream model in a deployment file, converted by the CLI: (the .yml, its input names)."""
    ins, outs = io_names(stream)
    sg = {"input_tensors": ins[0], "input_shapes": "1,8", "input_data_formats": "NONE", "input_ranges": "-1,1",
          "output_tensors": outs[0], "output_shapes": "1,5", "output_data_formats": "NONE"}
    entry = {"platform": "tflite", "model_file_path": str(stream), "model_sha256_checksum": sha256(stream),
             "runtime": "cpu", "subgraphs": [sg]}
    yml = write_deployment(tmp_path / "deploy.yml", {"ring": entry}, library="state")
    r = cli("convert", "--config", yml, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return yml, ins


def test_run_validate_covers_a_sequence_through_the_cli(stream, tmp_path):
    yml, ins = _converted(stream, tmp_path)
    r = cli("run", "--config", yml, "--validate", "--round", "3", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "stateful model: validated over 8 runs from its initial state" in out
    assert "Similarity test passed" in out


def test_run_validate_takes_a_sequence_from_input_dir(stream, tmp_path):
    """--input_dir holding sub-folders only (000/, 001/, ...): a stream's runs, in name order, from
    the initial state, LiteRT over the same runs; a folder with its own files is no sequence."""
    from mace.config.files import sequence_steps

    yml, ins = _converted(stream, tmp_path)
    seq = tmp_path / "stream"
    for k in range(11):
        (seq / f"{k:03d}").mkdir(parents=True)
        np.save(seq / f"{k:03d}" / f"{ins[0].replace(':', '_')}.npy", rand(1, 8, seed=40 + k))
    assert sequence_steps(seq) == [seq / f"{k:03d}" for k in range(11)]
    np.save(seq / "stray.npy", rand(1, 8, seed=1))
    assert sequence_steps(seq) is None
    (seq / "stray.npy").unlink()
    out_dir = tmp_path / "out"
    r = cli("run", "--config", yml, "--validate", "--round", "0", "--input_dir", seq, "--output_dir", out_dir,
            cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "stateful model: validated over the 11 runs of the sequence in" in out
    assert "Similarity test passed" in out
    # the run's own outputs are the first step's, from the initial state
    engine, x, y = engine_for(stream)
    first = engine.run({x: rand(1, 8, seed=40)})[y]
    (written,) = out_dir.glob("*.npy")
    np.testing.assert_allclose(np.load(written), first, rtol=1e-5, atol=1e-6)


def test_an_assignment_nobody_reads_survives_the_passes():
    """AssignVariable has no outputs and may assign a constant: fold_constants and remove_dead_ops
    must keep it (OpSpec.side_effects); the next run reads what it stored."""
    from tests.ops.ir_graph import graph_of

    one = np.ones((1, 3), np.float32)
    graph = graph_of({"x": (1, 3)}, [
        ("ReadVariable", [], ["s"], {"variable": "v", "shape": [1, 3], "dtype": "float32"}),
        ("Eltwise", ["x", "s"], ["y"], {"type": "SUM"}),
        ("AssignVariable", ["seven", "start", "s"], [], {"variable": "v"})],
        consts={"seven": one * 7, "start": one * 2})
    transform(graph, {"runtime": "cpu"})
    assert [op.type for op in graph.net.op].count("AssignVariable") == 1
    engine = Engine(graph)
    assert engine.run({"x": one})["y"].tolist() == [[3, 3, 3]]   # 1 + the initial 2
    assert engine.run({"x": one})["y"].tolist() == [[8, 8, 8]]   # 1 + the 7 assigned
    engine.reset_state()
    assert engine.run({"x": one})["y"].tolist() == [[3, 3, 3]]


class TwoWrites(tf.Module):
    """A variable assigned twice in one run, read in between and after: the second write is what
    the next run starts from."""

    def __init__(self):
        self.acc = tf.Variable(tf.constant([[0.5, -0.5, 1.0]]), name="acc")

    @tf.function(input_signature=[tf.TensorSpec((1, 3), tf.float32, name="x0")])
    def __call__(self, x):
        self.acc.assign(self.acc * 0.9 + x)
        middle = tf.tanh(self.acc)
        self.acc.assign(self.acc - 0.25 * middle)
        return middle + self.acc


def test_a_variable_written_twice_in_a_run(tmp_path):
    module = TwoWrites()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    conv.experimental_enable_resource_variables = True
    path = tmp_path / "twice.tflite"
    path.write_bytes(conv.convert())
    engine, x, y = engine_for_shape(path, (1, 3))
    assert [op.type for op in engine.graph.net.op].count("AssignVariable") == 1
    sequence = [{x: rand(1, 3, seed=20 + k)} for k in range(5)]
    want = [r[y] for r in run_litert_sequence(path, sequence, [y])]
    for k, feed in enumerate(sequence):
        np.testing.assert_allclose(engine.run(feed)[y], want[k], rtol=1e-5, atol=1e-6, err_msg=f"step {k}")


def engine_for_shape(path, shape):
    ins, outs = io_names(path)
    graph = convert("tflite", ModelSpec(path, [TensorSpec(ins[0], shape, "NONE")], [TensorSpec(outs[0], None, "NONE")]))
    transform(graph, {"runtime": "cpu"})
    return Engine(graph), ins[0], outs[0]


WC = tf.constant(rand(6, 1, 6, 5, seed=3))


class StreamConv(tf.Module):
    """TensorFlow's streaming conv, as microWakeWord exports it: the last 4 input frames kept in a
    variable, the 2 new ones appended, the conv over all 6, the last 4 assigned back."""

    def __init__(self):
        self.states = tf.Variable(tf.constant(rand(1, 4, 1, 6, seed=4) * 0.1), name="states")

    @tf.function(input_signature=[tf.TensorSpec((1, 2, 1, 6), tf.float32, name="x0")])
    def __call__(self, x):
        c = tf.concat([self.states, x], axis=1)
        self.states.assign(c[:, -4:])
        return tf.nn.relu(tf.nn.conv2d(c, WC, strides=1, padding="VALID"))


@pytest.mark.parametrize("reference", [False, True])
def test_a_streaming_conv_buffer_is_one_op_with_litert_numbers(tmp_path, reference):
    """fuse_stream_buffer: ReadVariable -> Concat -> StridedSlice -> AssignVariable is one
    StreamBuffer (fast and reference kernels); the outputs over a sequence are LiteRT's, and
    reset_state starts it over."""
    module = StreamConv()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    conv.experimental_enable_resource_variables = True
    path = tmp_path / "stream_conv.tflite"
    path.write_bytes(conv.convert())
    ins, outs = io_names(path)
    graph = convert("tflite", ModelSpec(path, [TensorSpec(ins[0], (1, 2, 1, 6), "NONE")],
                                        [TensorSpec(outs[0], None, "NONE")]))
    transform(graph, {"runtime": "cpu"})
    kinds = [op.type for op in graph.net.op]
    assert "StreamBuffer" in kinds and not {"ReadVariable", "AssignVariable", "StridedSlice"} & set(kinds), kinds
    engine = Engine(graph, options={"reference_kernels": reference})
    (buffer,) = [n for n in engine.nodes if n.op.type == "StreamBuffer"]
    assert (buffer.tag == "cpu") == reference
    x, y = ins[0], outs[0]
    sequence = [{x: rand(1, 2, 1, 6, seed=30 + k)} for k in range(6)]
    want = [r[y] for r in run_litert_sequence(path, sequence, [y])]
    got = [engine.run(feed)[y] for feed in sequence]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"step {k}")
    engine.reset_state()
    np.testing.assert_array_equal(engine.run(sequence[0])[y], got[0])
