"""Benchmark tables, offline and online reports: sections, columns and consistent numbers."""
from __future__ import annotations

import json

import numpy as np
import pytest

from mace.config import load_deployment
from mace.convert import convert_deployment
from mace.report.benchmark import benchmark_engine
from mace.report.memory import memory_timeline
from mace.report.offline import md5_of
from mace.report.online import online_report
from mace.ir.opstats import graph_stats
from mace.report.session import open_model
from tests.cli_helpers import cli, conv_model, small_model_entry, write_deployment
from tests.report.helpers import converted_digits, digits_session

SECTIONS = ["Warm Up", "Run without statistics", "Run with statistics", "Sort by Run Order",
            "Sort by Computation Time", "Stat by Op Type", "Stat by MACs(Multiply-Accumulation)",
            "Summary of Ops' Stat"]
OP_COLUMNS = ["Op Type", "Start", "First", "Avg(ms)", "%", "cdf%", "GMACPS", "Stride", "Pad", "Filter Shape",
              "Output Shape", "Dilation", "name"]


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return converted_digits(tmp_path_factory.mktemp("bench"))


def section(text: str, title: str) -> tuple:
    """(headers, rows) of the MACE-style table titled `title` in `text`."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == title)
    header = lines[start + 2]
    rows = []
    for ln in lines[start + 4:]:
        if ln.startswith("-"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return [c.strip() for c in header.strip().strip("|").split("|")], rows


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def test_benchmark_command_prints_maces_sections_and_json(digits):
    work, config = digits
    r = ok(cli("benchmark", "--config=deploy.yml", "--build_dir=out", "--round=5", "--json=b.json", cwd=work))
    positions = [r.stdout.index(title) for title in SECTIONS]
    assert positions == sorted(positions)
    headers, rows = section(r.stdout, "Sort by Run Order")
    assert headers == OP_COLUMNS
    n_ops = len(digits_session(work, config).engine.nodes)
    assert len(rows) == n_ops
    assert sum(float(row[4]) for row in rows) == pytest.approx(100.0, abs=0.05)
    assert float(rows[-1][5]) == pytest.approx(100.0, abs=0.01)
    assert [row[0] for row in rows][:2] == ["Conv2D", "Conv2D"] and rows[0][7] == "[1,1]"
    headers, top = section(r.stdout, "Sort by Computation Time")
    assert headers == OP_COLUMNS and len(top) == min(10, n_ops)
    assert [float(t[3]) for t in top] == sorted((float(t[3]) for t in top), reverse=True)
    headers, types = section(r.stdout, "Stat by Op Type")
    assert headers == ["Op Type", "Count", "Avg(ms)", "%", "cdf%", "MACs", "GMACPS", "Called times"]
    assert sum(int(t[1]) for t in types) == n_ops
    conv = next(t for t in types if t[0] == "Conv2D")
    assert conv[5] == f"{8 * 8 * 8 * 9 + 4 * 4 * 16 * 9 * 8:,}"  # out elements x kh x kw x C_in
    headers, macs = section(r.stdout, "Stat by MACs(Multiply-Accumulation)")
    assert headers == ["total", "round", "first(G/s)", "avg(G/s)", "std"]
    assert macs[0][0] == f"{4608 + 18432 + 2560:,}" and macs[0][1] == "5"
    for title in ("Warm Up", "Run without statistics", "Run with statistics", "Summary of Ops' Stat"):
        headers, rows = section(r.stdout, title)
        assert headers == ["round", "first(ms)", "curr(ms)", "min(ms)", "max(ms)", "avg(ms)", "std"]
    data = json.loads((work / "b.json").read_text())["models"][0]
    assert [o["name"] for o in data["run_order"]] == [row[-1] for row in section(r.stdout, "Sort by Run Order")[1]]
    assert data["macs"]["total"] == 25600 and len(data["by_computation_time"]) == n_ops
    # saved next to the model for `visualize`
    assert (work / "out" / "digits" / "model" / "digits_cnn_benchmark.json").exists()


def test_run_benchmark_is_the_same_tables(digits):
    work, _ = digits
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--benchmark", "--round=3", cwd=work))
    assert "Run model digits_cnn" in r.stdout
    for title in SECTIONS:
        assert title in r.stdout


def test_benchmark_numbers_are_consistent(digits):
    session = digits_session(*digits)
    r = benchmark_engine(session.engine, session.inputs, rounds=4)
    assert r.run_with_statistics.round == 4 and r.warm_up.round == 1
    assert sum(o.percent for o in r.run_order) == pytest.approx(100.0)
    assert sum(t.percent for t in r.by_op_type) == pytest.approx(100.0)
    assert r.by_op_type[-1].cdf == pytest.approx(100.0)
    assert len(r.round_op_ms) == 4
    assert r.ops_summary.avg == pytest.approx(sum(o.avg for o in r.run_order), rel=1e-6)
    s = r.run_with_statistics
    assert s.min <= s.avg <= s.max and s.first > 0


def test_macs_of_a_known_conv_equal_the_formula(tmp_path):
    checksum = conv_model(tmp_path / "conv.onnx")
    write_deployment(tmp_path / "conv.yml", {"conv": small_model_entry(
        tmp_path / "conv.onnx", checksum, "input:0", "1,3,6,6", "scope/out", fmt="NCHW")}, library="conv")
    config = load_deployment(tmp_path / "conv.yml")
    convert_deployment(config, tmp_path / "out")
    session = open_model(config, config.models["conv"], tmp_path / "out")
    conv = next(s for s in graph_stats(session.engine.graph) if s.type == "Conv2D")
    n, c, h, w, o, k = 1, 3, 6, 6, 4, 3
    assert conv.macs == n * o * h * w * c * k * k  # pad 1, stride 1: output H x W = input H x W
    assert conv.params == o * c * k * k + o and conv.filter_shape == [o, c, k, k]
    r = benchmark_engine(session.engine, session.inputs, rounds=2)
    assert r.macs.total == conv.macs


def test_convert_writes_the_offline_report(digits):
    work, config = digits
    text = (work / "out" / "digits" / "model" / "digits_cnn_report.txt").read_text()
    session = digits_session(work, config)
    graph = session.engine.graph
    assert f"Model ID: {md5_of(work / 'digits' / 'digits_cnn.onnx')}" in text
    assert "Tool version:" in text and "Input shape: (1, 8, 8, 1)" in text and "Output shape: (1, 10)" in text
    for column in ("Layer name", "#ops", "#params", "param size", "activations"):
        assert column in text
    params = sum(v.size for v in graph.consts.values())
    assert f"Total parameters: {params / 1000:.2f}K ({params})" in text
    arena = int(text.split("Required tensor arena size: ")[1].split()[0])
    bound = int(text.split("simultaneously live tensors): ")[1].split()[0])
    assert arena >= bound > 0
    assert arena == session.engine.plan.arena_size == memory_timeline(graph).plan.arena_size
    data_size = (work / "out" / "digits" / "model" / "digits_cnn.data").stat().st_size
    assert f"weights {data_size})" in text
    r = ok(cli("convert", "--config=deploy.yml", "--build_dir=out", "--report", cwd=work))
    assert "Offline report for 'digits_cnn'" in r.stdout and "conv1 <- conv1, bn1, relu1" in r.stdout


def test_online_report(digits):
    session = digits_session(*digits)
    rep = online_report(session.engine, session.inputs, rounds=3)
    assert sum(rep.percent(s.index) for s in rep.layers) == pytest.approx(100.0)
    assert rep.arena_bytes == session.engine.plan.arena_size
    assert rep.weight_bytes == sum(v.nbytes for v in session.engine.graph.consts.values())
    assert rep.kernel_bytes > 0 and rep.peak_rss_bytes > 10 * 2 ** 20 and rep.total_ms > 0
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--report", "--round=2", cwd=digits[0]))
    assert "Execution report" in r.stdout and "Breakdown per layer" in r.stdout
    assert "Peak process memory (RSS)" in r.stdout and "Latency (ms)" in r.stdout
    shares = [float(x.split("(")[1].split("%")[0]) for x in r.stdout.splitlines()
              if x.startswith("| ") and "%)" in x]
    assert len(shares) == len(session.engine.nodes) and sum(shares) == pytest.approx(100.0, abs=0.1)
    assert np.isfinite(rep.profiled_ms)
