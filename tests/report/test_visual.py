"""The visual report: self-contained HTML that renders in headless Chromium, and the Graphviz file."""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from mace.report.benchmark_model import benchmark_model
from mace.report.html import visualize_model
from tests.cli_helpers import cli
from tests.report.helpers import BUILD, converted_digits

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    work, config = converted_digits(tmp_path_factory.mktemp("visual"))
    benchmark_model(config, config.models["digits_cnn"], work / BUILD, rounds=3)
    return work, config


def _find_browser():
    return next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


def _install_chromium() -> str:
    """Try Debian's package (CI runs as root with apt); returns why it failed, or ''."""
    if not shutil.which("apt-get"):
        return "no chromium and no apt-get to install it"
    if os.geteuid() != 0:
        return "no chromium, and installing it needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "install", "-y", "-q", "chromium"], ["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", "chromium"]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        if cmd[1] == "install" and r.returncode == 0 and _find_browser():
            return ""
    return f"apt-get install chromium failed: {r.stderr.strip()[-300:]}"


@pytest.fixture(scope="module")
def browser():
    path = _find_browser()
    if path is None:
        why = _install_chromium()
        path = _find_browser()
        if path is None:
            print(f"SKIP headless Chromium checks: {why}")
            pytest.skip(f"headless Chromium unavailable: {why}")
    return path


def _chromium(browser: str, profile: Path, *args, timeout: int = 90):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _png_pixels(path: Path) -> tuple:
    """(width, height, rows of raw RGB(A) bytes) of an 8-bit non-interlaced PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (2, 6)
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            pred = {0: 0, 1: a, 2: b, 3: (a + b) // 2}.get(kind)
            if pred is None:  # Paeth
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def test_html_is_self_contained(digits):
    work, config = digits
    files = visualize_model(config, config.models["digits_cnn"], work / BUILD, dot=True)
    page = files.html_path.read_text()
    assert files.html_path.name == "digits_cnn_index.html" and files.has_benchmark
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched
    assert "<link" not in page and "@import" not in page and "url(http" not in page
    assert "default-src 'none'" in page  # and the page says so to the browser
    dot = files.dot_path.read_text()
    assert dot.startswith('digraph "digits_cnn"') and dot.count('[label="') >= files.nodes
    assert "fused: conv1 + bn1 + relu1" in dot


def test_visualize_command(digits):
    work, _ = digits
    r = cli("visualize", "--config=deploy.yml", f"--build_dir={BUILD}", "--dot", "--output_dir=viz", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "viz" / "digits_cnn_index.html").exists() and (work / "viz" / "digits_cnn.dot").exists()
    assert "5 ops" in r.stdout


def test_html_renders_in_headless_chromium(digits, browser, tmp_path):
    work, config = digits
    files = visualize_model(config, config.models["digits_cnn"], work / BUILD)
    url = files.html_path.resolve().as_uri()
    r = _chromium(browser, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom", url)
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", r.stdout).group(1)
    assert 'data-rendered="yes"' in body, body
    assert f'data-nodes="{files.nodes}"' in body
    assert "data-errors" not in body, body
    assert len(re.findall(r'<g class="node[ "]', r.stdout)) == files.nodes
    assert r.stdout.count('class="bar"') == files.nodes  # latency bars from the benchmark
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == [], console
    shot = tmp_path / "shot.png"
    r = _chromium(browser, tmp_path / "profile", "--hide-scrollbars", "--window-size=1200,900",
                  f"--screenshot={shot}", "--virtual-time-budget=5000", url)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    width, height, rows, bpp = _png_pixels(shot)
    assert (width, height) == (1200, 900)
    colors = {row[i:i + 3] for row in rows[::7] for i in range(0, len(row), bpp * 7)}
    assert len(colors) > 20, f"blank screenshot: {len(colors)} colours"
    header = rows[20][:bpp * 3]  # the dark page header is drawn
    assert header[0] < 80 and header[1] < 80


def test_convert_time_index_html_renders_in_headless_chromium(browser, tmp_path):
    """MACE's <net>_index.html, written by convert itself (no benchmark yet: no latency bars)."""
    work, config = converted_digits(tmp_path)
    page = work / BUILD / config.library_name / "model" / "digits_cnn_index.html"
    r = _chromium(browser, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", r.stdout).group(1)
    assert 'data-rendered="yes"' in body and 'data-nodes="5"' in body and "data-errors" not in body, body
    assert len(re.findall(r'<g class="node[ "]', r.stdout)) == 5
    assert r.stdout.count('class="bar"') == 0
    assert [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln] == []
