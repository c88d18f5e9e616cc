"""`sweep` over 2 models x 2 runtimes (cpu, quantized) x (host + the ssh loopback board): the table,
sweep.json/csv and the HTML page, rendered in headless Chromium (as tests/report/test_visual.py),
its plot labels measured there (none over another, none cut: tests/scale/test_sweep_page.py); and
a gpu sweep on the board, whose Python has no pyopencl: its row says it ran on the board's CPU."""
from __future__ import annotations

import csv
import json
import re
from html import escape

from tests.cli_helpers import cli, digits_model, write_deployment
from tests.devices.helpers import board_work, ssh_entry, write_devices
from tests.report.test_visual import _chromium, browser  # noqa: F401 - the fixture
from tests.scale.test_sweep_page import label_problems


def test_sweep_two_models_two_runtimes_host_and_board(tmp_path, sshd, numpy_only_python, browser):  # noqa: F811
    work = board_work(tmp_path)
    for name, library in (("a.yml", "liba"), ("b.yml", "libb")):
        write_deployment(work / name, {f"m_{library}": digits_model(
            accuracy_validation_script="digits/accuracy_validator.py", quantize_calibration_data="digits/inputs")},
            library=library, target_abis=["host"])
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", numpy_only_python))
    r = cli("sweep", "--config=a.yml", "--config=b.yml", "--runtimes=cpu,quantized", "--devices=host,board",
            "--device_yml=devices.yml", "--round=2", "--build_dir=out", cwd=work, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads((work / "out/sweep/sweep.json").read_text())["rows"]
    assert sorted((x["model"], x["runtime"], x["device"]) for x in rows) == sorted(
        (m, rt, d) for m in ("m_liba", "m_libb") for rt in ("cpu", "quantized") for d in ("host", "board"))
    for x in rows:
        assert x["error"] == "" and x["passed"] is True and x["latency_ms"] > 0
        assert 0.9 < x["accuracy"] < 1.0 and x["accuracy_result"]["samples"] == 450
    assert len(list(csv.reader(open(work / "out/sweep/sweep.csv")))) == 9
    assert "Sweep" in r.stdout and "board" in r.stdout
    page = work / "out/sweep/sweep.html"
    text = page.read_text()
    assert "default-src 'none'" in text and not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    d = _chromium(browser, tmp_path / "profile", "--virtual-time-budget=3000", "--dump-dom", page.resolve().as_uri())
    assert d.returncode == 0, d.stderr[-2000:]
    assert 'data-rows="8"' in d.stdout and 'data-plots="2"' in d.stdout
    assert d.stdout.count('class="point"') == 8 and d.stdout.count("<tr>") == 9
    problems, points, named = label_problems(browser, page, tmp_path / "measure")
    assert problems == [] and points == named == 8, problems


def test_a_gpu_row_that_ran_on_the_boards_cpu_says_so(tmp_path, sshd, numpy_only_python):
    work = board_work(tmp_path)
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", numpy_only_python))
    r = cli("sweep", "--config=deploy.yml", "--runtimes=gpu", "--devices=board", "--device_yml=devices.yml",
            "--round=1", "--build_dir=out", cwd=work, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads((work / "out/sweep/sweep.json").read_text())["rows"]
    assert (row["runtime"], row["device"], row["passed"], row["error"]) == ("gpu", "board", True, "")
    assert "pyopencl" in row["fallback"], row
    table = r.stdout[r.stdout.index("Sweep"):]
    assert "gpu (ran on CPU)" in table and "fallback to the CPU: " in table
    html = (work / "out/sweep/sweep.html").read_text()
    assert "<td>gpu (ran on CPU)</td>" in html and escape(row["fallback"]) in html
    header = next(csv.reader(open(work / "out/sweep/sweep.csv")))
    assert "fallback" in header
