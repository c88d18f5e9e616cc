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


ACCURACY = '''
import numpy as np


class AccuracyValidator:
    """10 random samples in batches of 4: the model (batch 1..4) runs 4, 4 and 2 at a time."""
    def __init__(self, **kwargs):
        self.rows = []

    def sample_size(self):
        return 10

    def batch_size(self):
        return 4

    def preprocess(self, start, end, **kwargs):
        return {"x": np.random.default_rng(start).uniform(-1, 1, (end - start, 3, 16, 16)).astype(np.float32)}

    def postprocess(self, start, end, outputs, **kwargs):
        self.rows.append(outputs["prob"].shape[0])

    def result(self):
        return float(sum(self.rows) == 10 and len(self.rows) == 3)
'''


def test_an_accuracy_script_runs_real_batches(work):
    (work / "acc.py").write_text(ACCURACY)
    doc = yaml.safe_load((work / "cls.yml").read_text())
    doc["models"]["cls"]["accuracy_validation_script"] = "acc.py"
    (work / "acc.yml").write_text(yaml.safe_dump(doc))
    done = cli("run", "--config=acc.yml", cwd=work, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    row = next(line for line in done.stdout.splitlines() if "3 x 4" in line)
    assert "1.0" in row   # every batch came back whole, padding-free
