"""Fully quantized TFLite models with int8/uint8 inputs and outputs (issue 34, item 3), as MACE's
input_data_types / output_data_types choose them: the caller passes and gets the integers, or the
real values (scale applied). Against LiteRT on the same integers (or on the reals it is fed after
quantizing them with the input's scale), in float and on our int8 kernels, and through the CLI."""
import numpy as np
import pytest

from mace.config.specs import ModelSpec, TensorSpec
from mace.frontends import convert
from mace.frontends.tflite.model_file import read_model
from mace.runtime.engine import Engine
from mace.transform.pipeline import transform
from mace.validate.metrics import cosine
from mace.validate.reference import run_litert
from tests.cli_helpers import cli, sha256, write_deployment
from tests.tflite.tfl_case import io_names, rand, tf

W = tf.constant(rand(3, 3, 3, 8, seed=1))
FC = tf.constant(rand(8, 5, seed=2))


def net(x):
    y = tf.nn.relu6(tf.nn.conv2d(x, W, 1, "SAME"))
    return tf.nn.softmax(tf.matmul(tf.reduce_mean(y, axis=[1, 2]), FC))


def integer_io_model(path, io_type):
    concrete = tf.function(net).get_concrete_function(tf.TensorSpec((1, 8, 8, 3), tf.float32, name="x0"))
    conv = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = io_type
    conv.representative_dataset = lambda: ([rand(1, 8, 8, 3, seed=k)] for k in range(16))
    path.write_bytes(conv.convert())
    return path


@pytest.fixture(scope="module", params=["int8", "uint8"])
def model(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("qio") / f"net_{request.param}.tflite"
    integer_io_model(path, getattr(tf, request.param))
    m = read_model(path)
    tin, tout = m.tensors[m.inputs[0]], m.tensors[m.outputs[0]]
    assert tin.type_name == tout.type_name == request.param.upper()
    return path, request.param, tin


def quantized(x, tensor):
    info = np.iinfo(tensor.dtype)
    return np.clip(np.rint(x / tensor.scale[0]) + tensor.zero_point[0], info.min, info.max).astype(tensor.dtype)


def ours(path, feed, in_type, out_type, quantize):
    ins, outs = io_names(path)
    spec = ModelSpec(path, [TensorSpec(ins[0], (1, 8, 8, 3), "NHWC", dtype=in_type)],
                     [TensorSpec(outs[0], None, "NONE", dtype=out_type)])
    graph = convert("tflite", spec)
    transform(graph, {"quantize": quantize, "runtime": "cpu"})
    return Engine(graph).run({ins[0]: feed})[outs[0]]


def reals(value, tensor):
    if value.dtype.kind == "f":
        return value.astype(np.float64)
    return (value.astype(np.float64) - tensor.zero_point[0]) * tensor.scale[0]


@pytest.mark.parametrize("quantize", [False, True], ids=["float", "int8_kernels"])
@pytest.mark.parametrize("io", ["integers", "reals", "reals_in_integers_out"])
def test_quantized_io_matches_litert(model, io, quantize):
    """On our int8 kernels (the model's own scales) the outputs are LiteRT's within one step (our
    Softmax's output grid, docs/tflite.md); in float, the float model the file describes, within the
    model's own quantization error of LiteRT's integer arithmetic (cosine >= 0.99)."""
    path, kind, tin = model
    in_type, out_type = {"integers": (kind, kind), "reals": ("float32", "float32"),
                         "reals_in_integers_out": ("float32", kind)}[io]
    (name,), outs = io_names(path)
    tout = read_model(path).tensors[read_model(path).outputs[0]]
    for seed in range(3):
        x = rand(1, 8, 8, 3, seed=50 + seed)
        feed = x if in_type == "float32" else quantized(x, tin)
        got = ours(path, feed, in_type, out_type, quantize)
        want = run_litert(path, {name: feed}, outs, integer_outputs=outs if out_type != "float32" else ())[outs[0]]
        assert got.dtype == want.dtype == np.dtype(out_type)
        g, w = reals(got, tout), reals(want, tout)
        if quantize:
            assert np.abs(g - w).max() <= tout.scale[0] * 1.01
        else:
            assert cosine(w, g) >= 0.99
            if out_type != "float32":   # the integers are the float run's reals on the output grid
                real = ours(path, feed, in_type, "float32", quantize)
                np.testing.assert_array_equal(got, quantized(real, tout))


def test_integer_io_converts_and_validates_through_the_cli(model, tmp_path):
    path, kind, tin = model
    ins, outs = io_names(path)
    info = np.iinfo(tin.dtype)
    sg = {"input_tensors": ins[0], "input_shapes": "1,8,8,3", "input_data_types": kind,
          "input_ranges": f"{info.min},{info.max}", "output_tensors": outs[0], "output_shapes": "1,5",
          "output_data_formats": "NONE", "output_data_types": kind}
    entry = {"platform": "tflite", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
             "runtime": "cpu", "subgraphs": [sg]}
    for extra in ({}, {"quantize": 1}):
        yml = write_deployment(tmp_path / "deploy.yml", {"net": {**entry, **extra}}, library="qio")
        r = cli("convert", "--config", yml, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        r = cli("run", "--config", yml, "--validate", cwd=tmp_path, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Similarity test passed" in r.stdout
