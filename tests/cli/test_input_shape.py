"""`run --input_shape` and `config` for a model with a variable batch (input_shapes: -1..4,...),
as a user runs them: the run and its --validate at the new shape against onnxruntime, and one
clear error (exit 1, no traceback) for a shape the model cannot take or a bad flag."""
from __future__ import annotations

import hashlib

import onnx
import pytest
import yaml

from mace.testing.variable_shape_models import classifier
from tests.cli_helpers import cli


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = tmp_path_factory.mktemp("input_shape")
    onnx.save(classifier(), work / "cls.onnx")
    sg = {"input_tensors": "x", "input_shapes": "-1..4,3,16,16", "input_data_formats": "NCHW",
          "output_tensors": "prob", "output_data_formats": "NONE"}
    model = {"platform": "onnx", "model_file_path": "cls.onnx", "subgraphs": [sg], "runtime": "cpu",
             "model_sha256_checksum": hashlib.sha256((work / "cls.onnx").read_bytes()).hexdigest()}
    (work / "cls.yml").write_text(yaml.safe_dump({"library_name": "cls", "models": {"cls": model}}))
    done = cli("convert", "--config=cls.yml", cwd=work, timeout=300)
    assert done.returncode == 0, done.stderr
    return work


def test_config_shows_the_range(work):
    done = cli("config", "--config=cls.yml", cwd=work)
    assert done.returncode == 0, done.stderr
    assert "input 'x' dimension 0 varies 1..4 (converted at 1)" in " ".join(done.stdout.split())


@pytest.mark.parametrize("flag", ["x=4,3,16,16", "3,3,16,16"])
def test_run_and_validate_at_another_batch(work, flag):
    done = cli("run", "--config=cls.yml", "--validate", "--input_shape", flag, cwd=work, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert f"input shape(s) x={flag.split('=')[-1]} (--input_shape)" in out
    assert "Similarity test passed" in out


@pytest.mark.parametrize("flag, message", [
    ("x=5,3,16,16", "input tensor 'x' dimension 0: 5 is outside its range 1..4"),
    ("x=2,3,32,16", "input tensor 'x' dimension 2 is fixed at 16 in this model"),
    ("y=2,3,16,16", "--input_shape y: no model run here has that input"),
    ("x=2,3,16", "--input_shape x=2,3,16: the input has 4 dimensions"),
    ("x=2,a", "--input_shape x=2,a: expected NAME=comma-separated integers"),
])
def test_a_shape_the_model_cannot_take_is_one_error(work, flag, message):
    done = cli("run", "--config=cls.yml", "--validate", "--input_shape", flag, cwd=work, timeout=300)
    assert done.returncode == 1
    assert message in " ".join(done.stderr.split()) and "Traceback" not in done.stderr


def test_boards_are_refused_until_they_take_shapes(work):
    done = cli("run", "--config=cls.yml", "--input_shape", "x=2,3,16,16", "--target_abis", "arm64", cwd=work)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "--input_shape: runs on this machine only in this release" in " ".join(done.stderr.split())
    done = cli("run", "--config=cls.yml", "--input_shape", "x=2,3,16,16", "--device", "host", cwd=work)
    assert done.returncode == 0, done.stderr
