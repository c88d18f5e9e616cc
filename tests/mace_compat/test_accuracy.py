"""accuracy_validation_script: MACE's AccuracyValidator plugin run by `run`, checked against the
top-1 computed directly with onnxruntime on the same samples (scikit-learn's digits test set)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from mace.config.specs import TensorSpec
from mace.validate.accuracy import batches, evaluate, feed
from tests.cli_helpers import DIGITS, cli, digits_model, workdir, write_deployment


def test_digits_top1_through_the_cli_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    work = workdir(tmp_path)
    write_deployment(work / "acc.yml", {"digits_cnn": digits_model(
        accuracy_validation_script="digits/accuracy_validator.py")})
    assert cli("convert", "--config=acc.yml", cwd=work).returncode == 0
    r = cli("run", "--config=acc.yml", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "Top 1 accuracy:" in r.stdout
    saved = json.loads((work / "builds/digits/digits_cnn_accuracy.json").read_text())

    with np.load(DIGITS / "test_set.npz") as z:
        images, labels = z["images"], z["labels"]
    sess = ort.InferenceSession(str(DIGITS / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
    pred = np.array([sess.run(["prob"], {"image": img[None]})[0].argmax() for img in images])
    expected = float((pred == labels).mean())
    assert saved["samples"] == len(labels) == 450
    assert saved["result"]["top1"] == pytest.approx(expected, abs=1e-12)
    assert saved["result"]["correct"] == int((pred == labels).sum())
    assert 0.9 < expected < 1.0      # a trained model, and a test that could fail


class _Counting:
    """A validator whose batch does not divide the sample count: 5 samples, batches of 2."""

    def __init__(self):
        self.seen = []

    def sample_size(self):
        return 5

    def batch_size(self):
        return 2

    def preprocess(self, start, end):
        return {"x": [np.arange(start, end, dtype=np.float32)[:, None]]}   # one-item list: unwrapped

    def postprocess(self, start, end, outputs):
        self.seen.append((start, end, outputs["y"].reshape(-1).tolist()))

    def result(self):
        print("done")
        return len(self.seen)


def test_short_last_batch_is_padded_and_trimmed():
    spec = TensorSpec("x", (2, 1), "NONE", "float32", (-1.0, 1.0))
    v = _Counting()
    assert batches(5, 2) == [(0, 2), (2, 4), (4, 5)]
    inputs, pad = feed(v, [spec], 4, 5)
    assert pad == 1 and inputs["x"].tolist() == [[4.0], [0.0]]
    r = evaluate(v, lambda inp: {"y": inp["x"] * 10}, [spec], "m", "s")
    assert v.seen == [(0, 2, [0.0, 10.0]), (2, 4, [20.0, 30.0]), (4, 5, [40.0])]
    assert (r.result, r.printed, r.padded, r.batches) == (3, "done\n", 1, 3)


EMPTY_SET = '''
class AccuracyValidator(object):
    """A guarded script over a data set that turned out empty (a wrong folder): its result() says 0.0."""
    def __init__(self, **kwargs):
        self.correct, self.seen = 0, 0
    def sample_size(self):
        return 0
    def batch_size(self):
        return 1
    def preprocess(self, start, end, **kwargs):
        return {"image": []}
    def postprocess(self, start, end, output_map, **kwargs):
        self.seen += end - start
    def result(self):
        return {"top1": self.correct / max(self.seen, 1), "samples": self.seen}
'''


def test_an_accuracy_over_no_sample_fails(tmp_path):
    """An accuracy of no samples is no result: exit 1 naming the script's sample_size(), where the
    run used to report the script's empty-state 0.0 as the model's accuracy."""
    work = workdir(tmp_path)
    (work / "empty_acc.py").write_text(EMPTY_SET)
    write_deployment(work / "acc.yml", {"digits_cnn": digits_model(accuracy_validation_script="empty_acc.py")})
    assert cli("convert", "--config=acc.yml", cwd=work).returncode == 0
    r = cli("run", "--config=acc.yml", cwd=work)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "AccuracyValidator.sample_size() returned 0: no sample to evaluate" in r.stderr, r.stderr
    assert not (work / "builds/digits/digits_cnn_accuracy.json").exists()
    with pytest.raises(Exception, match="sample_size"):
        batches(0, 1)


def test_a_variable_batch_runs_whole_batches_without_padding():
    """input_shapes: 1..2,1 (converted at 1): batches of 2 run as one [2, 1] input, the last as [1, 1]."""
    spec = TensorSpec("x", (1, 1), "NONE", "float32", (-1.0, 1.0), dim_ranges={0: (1, 2)})
    v, shapes = _Counting(), []

    def run(inputs):
        shapes.append(inputs["x"].shape)
        return {"y": inputs["x"] * 10}

    r = evaluate(v, run, [spec], "m", "s")
    assert shapes == [(2, 1), (2, 1), (1, 1)] and r.padded == 0
    assert v.seen == [(0, 2, [0.0, 10.0]), (2, 4, [20.0, 30.0]), (4, 5, [40.0])]
