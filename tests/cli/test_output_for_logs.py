"""Output for logs and pipes (issue 37, item 6): tables keep every column and every name whole
when stdout is not a terminal (a CI log, `| tee`), `-h` says each default once, and `usage:`
names the program the way the user ran it."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper, numpy_helper

from mace.cli.main import build_parser
from tests.cli_helpers import ROOT, cli, save_onnx, write_deployment

# tf2onnx / torch.onnx-style names: longer than the 40 columns a terminal table gives a name
STAGE = "/model/backbone/stage_1/block_0/bottleneck"
NAMES = [f"{STAGE}/conv_a/Conv", f"{STAGE}/act_a/Relu_output_0", f"{STAGE}/conv_b/Conv", f"{STAGE}/act_b/Relu_output_0"]
HEADERS = ("#", "op", "type", "tensor", "framework ops", "cosine", "SQNR(dB)", "max_abs_err", "result")


@pytest.fixture(scope="module")
def long_names(tmp_path_factory):
    """A two-conv ONNX model whose tensors have long names, converted."""
    work = tmp_path_factory.mktemp("logs")
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(size=(4, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(size=(4, 4, 3, 3)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], [f"{STAGE}/conv_a/Conv_output_0"], name=NAMES[0], pads=[1] * 4),
             helper.make_node("Relu", [f"{STAGE}/conv_a/Conv_output_0"], [NAMES[1]], name=f"{STAGE}/act_a/Relu"),
             helper.make_node("Conv", [NAMES[1], "w2"], [f"{STAGE}/conv_b/Conv_output_0"], name=NAMES[2], pads=[1] * 4),
             helper.make_node("Relu", [f"{STAGE}/conv_b/Conv_output_0"], [NAMES[3]], name=f"{STAGE}/act_b/Relu"),
             helper.make_node("GlobalAveragePool", [NAMES[3]], ["y"], name="pool")]
    digest = save_onnx(work / "long.onnx", nodes, [("x", [1, 3, 8, 8])], [("y", [1, 4, 1, 1])], [w1, w2])
    entry = {"platform": "onnx", "model_file_path": "long.onnx", "model_sha256_checksum": digest, "runtime": "cpu",
             "subgraphs": [{"input_tensors": "x", "input_shapes": "1,3,8,8", "input_data_formats": "NCHW",
                            "output_tensors": "y", "output_shapes": "1,4,1,1", "output_data_formats": "NCHW"}]}
    write_deployment(work / "logs.yml", {"logs": entry}, library="logs")
    r = cli("convert", "--config=logs.yml", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    return work


def test_a_piped_table_keeps_every_column_and_whole_names(long_names):
    """The layer table of `run --validate_all_layers` (the one `debug` prints too) through a pipe,
    even with COLUMNS=80 in the environment: each header and each long name whole, nothing cut."""
    r = cli("run", "--config=logs.yml", "--validate_all_layers", cwd=long_names,
            env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stdout + r.stderr
    table = r.stdout[r.stdout.index("Layers of logs"):]
    header = next(line for line in table.splitlines() if "cosine" in line)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == list(HEADERS), header
    for name in (NAMES[1], NAMES[3]):
        row = next(line for line in table.splitlines() if name in line)   # the whole name, on one line
        assert "PASS" in row and re.search(r"\b1\.0000\d\d\b", row), row
    assert "…" not in r.stdout


def _help_texts():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p.format_help() for name, p in sub.choices.items()}


def test_help_says_each_default_once():
    texts = _help_texts()
    assert set(texts) >= {"convert", "run", "benchmark", "sweep", "debug", "quantize_stat"}
    for name, text in texts.items():
        flat = " ".join(text.split())
        assert "(default: None)" not in flat and "(default: False)" not in flat, name
        for option in re.split(r"\s(?=--?\w)", flat):   # one option's help
            assert len(re.findall(r"[(;] ?default\b", option)) <= 1, f"{name}: {option}"
    run = " ".join(texts["run"].split())
    assert "(default builds/<library>/) --omp_num_threads" in run          # its own words, nothing appended
    assert "--round ROUND timed runs after the warm-up run (default: 1)" in run   # real defaults still shown
    r = cli("quantize_stat", "-h", cwd=ROOT)
    assert "(default: None)" not in r.stdout and "(default: 0.0)" in " ".join(r.stdout.split())


def test_usage_names_the_program_as_the_user_ran_it(tmp_path):
    r = cli("--help", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("usage: converter.py "), r.stdout[:200]
    script = Path(sys.executable).parent / "mace-converter"   # the console script of an installed checkout
    if not script.exists():
        pytest.skip(f"no {script}: the package is not installed in this interpreter's environment")
    for args, usage in ((["--help"], "usage: mace-converter "), (["run", "-h"], "usage: mace-converter run ")):
        r = subprocess.run([str(script), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.startswith(usage), r.stdout[:200] + r.stderr[-2000:]
