"""The corpus script's inputs for streaming and name models (benchmarks/zoo.py): a streaming
model's `sequence: N` rows are N runs cut in order from one stream of microWakeWord features,
quantized to the input's integers, written as the step sub-folders `run --input_dir` takes as a
sequence; ethnicolr's names become its bigram ids as its own preprocessing makes them."""
import importlib.util
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("zoo", ROOT / "benchmarks" / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)

STREAM = {"name": "mww", "sequence": 5,
          "inputs": [{"name": "serving_default_input_audio:0", "shape": [1, 3, 40], "format": "NONE",
                      "kind": "micro_features", "dtype": "int8"}]}
SCALE, ZERO = 0.10196078568696976, -128   # microWakeWord's input quantization


def test_a_stream_is_written_as_steps_of_one_feature_sequence(tmp_path, monkeypatch):
    pytest.importorskip("tensorflow", reason="TFLite Micro's audio front end is TensorFlow's op")
    from mace.config.files import sequence_steps

    monkeypatch.setattr(zoo, "input_quantization", lambda path, name: (SCALE, ZERO))
    val, cal = zoo.write_stream(STREAM, tmp_path, tmp_path / "m.tflite")
    name = zoo.safe_name(STREAM["inputs"][0]["name"]) + ".npy"
    for folder, seed in ((val, 0), (cal, 1)):
        steps = sequence_steps(folder)
        assert [p.name for p in steps] == ["000", "001", "002", "003", "004"]
        got = np.concatenate([np.load(p / name)[0] for p in steps])   # [15, 40], in order
        assert got.dtype == np.int8
        features = zoo.micro_features(STREAM["inputs"][0], seed, 5)
        assert features.shape == (15, 40) and 0 <= features.min() and features.max() < 26.1
        want = np.clip(np.round(features / SCALE + ZERO), -128, 127).astype(np.int8)
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(np.load(val / "000" / name), np.load(cal / "000" / name))   # other audio


def test_names_become_the_packages_bigram_ids(tmp_path):
    archive = tmp_path / "eth.whl"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("vocab.csv", "vocab\nUNK\nar\nGa\nrc\nci\nia\n M\nar\n")
    spec = {"shape": [1, 6], "vocab": "vocab.csv"}
    # Garcia: Ga ar rc ci ia -> 2 1 3 4 5 ("ar" twice in the file: the first, as list.index), padded in front
    np.testing.assert_array_equal(zoo.name_ngrams(spec, 0, archive), [[0, 2, 1, 3, 4, 5]])
    assert zoo.name_ngrams(spec, 0, archive).dtype == np.float32
    # "Garcia Maria" has 11 bigrams: the front is cut (pad_sequences' truncating='pre'); unknown -> 0
    full = zoo.name_ngrams({**spec, "full_name": True}, 0, archive)
    np.testing.assert_array_equal(full, [[0, 6, 0, 1, 0, 5]])   # 'a ', ' M', 'Ma', 'ar', 'ri', 'ia'
