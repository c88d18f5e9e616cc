"""TFLite models through the CLI as a user runs them: convert, run --validate (LiteRT as the
framework), layer-by-layer validation, debug, and the offline report's model ID."""
import csv

import pytest

from mace.report.offline import md5_of
from tests.cli_helpers import cli, sha256, write_deployment
from tests.tflite.tfl_case import io_names, rand, tf, to_tflite

W = tf.constant(rand(3, 3, 3, 8, seed=11))
DW = tf.constant(rand(3, 3, 8, 1, seed=12))
FC = tf.constant(rand(8, 5, seed=13))


def net(x):
    y = tf.nn.relu6(tf.nn.conv2d(x, W, 1, "SAME"))
    y = x_pool = tf.nn.max_pool2d(tf.nn.depthwise_conv2d(y, DW, [1, 1, 1, 1], "SAME"), 2, 2, "VALID")
    return tf.nn.softmax(tf.matmul(tf.reduce_mean(x_pool + y, axis=[1, 2]), FC))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tfl_cli")
    return {mode: to_tflite(net, [(1, 8, 8, 3)], root / f"net_{mode}.tflite", mode)
            for mode in ("float", "int8")}


def deployment(tmp_path, path, **extra):
    ins, outs = io_names(path)
    model = {"platform": "tflite", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
             "runtime": "cpu", **extra,
             "subgraphs": [{"input_tensors": ins[0], "input_shapes": "1,8,8,3", "input_ranges": "-1,1",
                            "output_tensors": outs[0], "output_shapes": "1,5",
                            "output_data_formats": "NONE"}]}
    return write_deployment(tmp_path / "deploy.yml", {"net": model}, library="tfl")


def run_ok(*args, cwd):
    r = cli(*args, cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_float_model_validates_against_litert(models, tmp_path):
    yml = deployment(tmp_path, models["float"])
    run_ok("convert", "--config", yml, cwd=tmp_path)
    report = (tmp_path / "builds" / "tfl" / "model" / "net_report.txt").read_text()
    assert f"Model ID: {md5_of(models['float'])}" in report   # Plumerai's: MD5 of the FlatBuffer
    out = run_ok("run", "--config", yml, "--validate_all_layers", cwd=tmp_path)
    assert "Similarity test passed" in out or "within the threshold" in out
    rows = list(csv.DictReader(open(tmp_path / "builds" / "tfl" / "model" / "net_layers.csv")))
    checked = [r for r in rows if r["status"] in ("PASS", "FAIL", "FIRST_FAIL")]
    assert len(checked) >= 4 and all(r["status"] == "PASS" for r in checked)
    assert all(float(r["cosine"]) > 0.9999 for r in checked)


@pytest.mark.parametrize("extra", [{"quantize": 1}, {"runtime": "dsp"}], ids=["cpu_int8", "dsp"])
def test_int8_model_runs_quantized_and_validates(models, tmp_path, extra):
    yml = deployment(tmp_path, models["int8"], **extra)
    run_ok("convert", "--config", yml, cwd=tmp_path)
    quant = (tmp_path / "builds" / "tfl" / "model" / "net_quantize_report.txt").read_text()
    assert "QAT" in quant   # the model's own scales were used, no calibration
    out = run_ok("run", "--config", yml, "--validate", cwd=tmp_path)
    assert "Similarity test passed" in out
    out = run_ok("debug", "--config", yml, cwd=tmp_path)
    assert "no divergence" in out


def test_float_model_on_gpu_validates(models, tmp_path):
    from tests.gpu.gpu_case import require_gpu

    require_gpu()   # skips, saying why, without an OpenCL device
    yml = deployment(tmp_path, models["float"], runtime="gpu")
    run_ok("convert", "--config", yml, cwd=tmp_path)
    out = run_ok("run", "--config", yml, "--validate", "--json", tmp_path / "r.json", cwd=tmp_path)
    assert "Similarity test passed" in out
    import json

    rows = json.loads((tmp_path / "r.json").read_text())["models"][0]["validation"]
    assert rows and all(r["cosine"] >= 0.995 for r in rows)
