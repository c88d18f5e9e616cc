"""The corpus's mixed-precision column (benchmarks/zoo.py): a model whose plain PTQ misses 0.98
is converted again with quantize_target_cosine, and the corpus passes only if that reaches 0.98.

The real run: openWakeWord's melspectrogram (PTQ 0.96: the Log of a power spectrum, whose range
uint8 cannot hold) through the CLI against onnxruntime, with the layers kept float named by the
calibration report. The table logic is checked on hand-made result rows."""
import pytest
from tests.zoo._corpus import MANIFEST, fetch_or_skip, zoo


def _row(quant, mixed=None):
    row = {"ops": 3, "cpu": {"convert": True, "cosine": 1.0}, "quant": {"convert": True, "cosine": quant}}
    if mixed is not None:
        row["mixed"] = {"convert": True, "cosine": mixed, "kept": ["a", "b"], "float_ops": 5}
    return row


def test_a_ptq_miss_fails_the_corpus_only_where_mixed_precision_misses_too():
    assert not zoo.failed({"m": _row(0.99)})
    assert not zoo.failed({"m": _row(0.90, 0.985)})
    assert zoo.failed({"m": _row(0.90, 0.97)})
    assert zoo.failed({"m": _row(0.90)})          # mixed precision not run: the miss stands


def test_the_column_says_how_many_layers_stayed_float():
    model = {"name": "m", "package": "p", "exporter": "e"}
    [row] = zoo.table_rows([model], {"m": _row(0.90, 0.985)})
    assert row[zoo.COLUMNS.index("quantized cosine")] == "0.90000 ✗"
    assert row[zoo.COLUMNS.index(next(c for c in zoo.COLUMNS if c.startswith("mixed")))] == \
        "0.98500 (2 kept float, 5 float ops in all)"
    [row] = zoo.table_rows([model], {"m": _row(0.99)})
    assert "not needed" in row


def test_melspectrogram_reaches_the_threshold_with_mixed_precision():
    pytest.importorskip("onnxruntime", reason="the melspectrogram's reference is onnxruntime")
    model = next(m for m in MANIFEST["models"] if m["name"] == "oww_melspectrogram")
    archive = fetch_or_skip(model["package"])
    row = zoo.run_model(model, archive, ["quant", "mixed"])
    assert row["quant"]["cosine"] < zoo.THRESHOLDS["quant"], row   # only a test while PTQ misses
    mixed = row["mixed"]
    assert mixed["cosine"] >= zoo.THRESHOLDS["mixed"], mixed
    assert mixed["reached"] and 0 < len(mixed["kept"]) <= mixed["float_ops"], mixed
