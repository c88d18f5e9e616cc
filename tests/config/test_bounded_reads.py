"""Nothing blocks or reads without end (issue 18, item 8): FIFOs and devices where a file is
expected, oversized deployment files, and downloads that trickle, never end or lie about their size.

The CLI runs as a user would (tests/cli_helpers.py); downloads come from a real http.server on
127.0.0.1 whose handlers misbehave on purpose.
"""
from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from mace.config import fetch as fetch_mod
from mace.config.fetch import fetch
from mace.errors import ConfigError
from tests.cli_helpers import cli, digits_model, no_proxy_env, workdir, write_deployment

KEY = "models.m.model_file_path"
SHA = "0" * 64
QUICK = 30   # seconds: far more than any of these needs, far less than a hang


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _one_error(r, *needles):
    assert r.returncode == 1, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in r.stderr, f"{n!r} not in {r.stderr}"


# ---- files that are not regular files -------------------------------------------------------
@pytest.mark.parametrize("command", ["convert", "run", "config"])
def test_a_fifo_as_config_is_refused_at_once(tmp_path, command):
    fifo = _fifo(tmp_path / "deploy.yml")
    start = time.monotonic()
    _one_error(cli(command, f"--config={fifo}", cwd=tmp_path, timeout=QUICK),
               f"{fifo}: cannot read (not a regular file: a FIFO)")
    assert time.monotonic() - start < QUICK


def test_dev_zero_as_config_is_refused(tmp_path):
    _one_error(cli("convert", "--config=/dev/zero", cwd=tmp_path, timeout=QUICK),
               "/dev/zero: cannot read (not a regular file: a character device)")


def test_a_fifo_as_devices_yml_is_refused(tmp_path):
    work = workdir(tmp_path)
    write_deployment(work / "arm.yml", {"digits_cnn": digits_model()}, target_abis=["arm64"])
    fifo = _fifo(work / "devices.yml")
    _one_error(cli("run", "--config=arm.yml", f"--device_yml={fifo}", cwd=work, timeout=QUICK),
               "devices.yml: cannot read (not a regular file: a FIFO)")


def test_config_size_limit_and_its_override(tmp_path):
    work = workdir(tmp_path)
    text = (work / "deploy.yml").read_text()
    (work / "big.yml").write_text(text + ("# padding\n" * (17 << 17)))   # 17 MiB of comments
    _one_error(cli("config", "--config=big.yml", cwd=work, timeout=QUICK),
               "big.yml: cannot read (larger than 16777216 bytes (set MACE_MAX_CONFIG_BYTES")
    # the override moves the limit (both ways; parsing 17 MiB of YAML would only be slow here)
    (work / "padded.yml").write_text(text + ("# padding\n" * 2000))          # ~20 KiB
    r = cli("config", "--config=padded.yml", cwd=work, timeout=QUICK)
    assert r.returncode == 0 and "digits_cnn" in r.stdout, r.stderr
    small = dict(os.environ, MACE_MAX_CONFIG_BYTES="10K")
    _one_error(cli("config", "--config=padded.yml", cwd=work, env=small, timeout=QUICK),
               "padded.yml: cannot read (larger than 10240 bytes")
    r = cli("config", "--config=padded.yml", cwd=work, env=dict(small, MACE_MAX_CONFIG_BYTES="64K"),
            timeout=QUICK)
    assert r.returncode == 0, r.stderr
    _one_error(cli("config", "--config=padded.yml", cwd=work, env=dict(os.environ, MACE_MAX_CONFIG_BYTES="lots"),
                   timeout=QUICK), "MACE_MAX_CONFIG_BYTES='lots': expected a positive number of bytes")


LAUGHS = "".join(f"{a}: &{a} [{', '.join([f'*{b}'] * 9)}]\n" for b, a in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize("command", ["convert", "run", "config"])
def test_billion_laughs_aliases_are_refused_at_once(tmp_path, command):
    """Issue 38: nine aliases of nine aliases, under 1 KB, are 9^9 values to every walk of the data."""
    work = workdir(tmp_path)
    text = (work / "deploy.yml").read_text()
    laughs = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + LAUGHS
    assert len(laughs) < 1024
    (work / "laughs.yml").write_text(laughs + text)
    start = time.monotonic()
    _one_error(cli(command, "--config=laughs.yml", cwd=work, timeout=QUICK),
               "laughs.yml: YAML aliases expand to", "(at most 100000)")
    assert time.monotonic() - start < QUICK


def test_aliases_a_deployment_file_really_uses_still_load(tmp_path):
    work = workdir(tmp_path)
    doc = yaml.safe_load((work / "deploy.yml").read_text())
    model = doc["models"]["digits_cnn"]
    lines = ["defaults: &defaults", *(f"  {k}: {json.dumps(v)}" for k, v in model.items()),
             f"library_name: {doc['library_name']}", "target_abis: [host]", "models:"]
    lines += [f"  m{i}:\n    <<: *defaults" for i in range(200)]
    (work / "aliased.yml").write_text("\n".join(lines) + "\n")
    r = cli("config", "--config=aliased.yml", cwd=work, timeout=QUICK)
    assert r.returncode == 0 and "m199" in r.stdout, r.stderr


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    work = workdir(tmp_path_factory.mktemp("bounded"))
    r = cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work)
    assert r.returncode == 0, r.stderr
    return work


def test_a_fifo_as_validation_inputs_data_is_refused(converted):
    fifo = _fifo(converted / "fifo_image.npy")
    write_deployment(converted / "fifo.yml", {"digits_cnn": digits_model(validation_inputs_data=[str(fifo)])})
    try:
        _one_error(cli("run", "--config=fifo.yml", "--build_dir=out", cwd=converted, timeout=QUICK),
                   "validation_inputs_data: input file", "is not a regular file: a FIFO")
    finally:
        fifo.unlink()


def test_a_fifo_in_input_dir_is_refused_and_a_file_there_still_works(converted):
    inputs = converted / "inputs"
    inputs.mkdir()
    fifo = _fifo(inputs / "image.npy")
    _one_error(cli("run", "--config=deploy.yml", "--build_dir=out", f"--input_dir={inputs}", cwd=converted,
                   timeout=QUICK), "--input_dir: input file", "is not a regular file: a FIFO")
    fifo.unlink()
    np.save(inputs / "image.npy", np.load(converted / "digits" / "inputs" / "image_0.npy"))
    r = cli("run", "--config=deploy.yml", "--build_dir=out", f"--input_dir={inputs}", cwd=converted)
    assert r.returncode == 0, r.stderr


def test_a_fifo_as_model_file_is_refused(tmp_path):
    fifo = _fifo(tmp_path / "m.onnx")
    yml = tmp_path / "deploy.yml"
    yml.write_text("library_name: x\n")
    with pytest.raises(ConfigError, match="models.m.model_file_path: not a regular file"):
        fetch(str(fifo), SHA, KEY, yml, tmp_path / "downloads")


# ---- downloads ------------------------------------------------------------------------------
class _Misbehaving(http.server.BaseHTTPRequestHandler):
    """/trickle: one byte every 0.2 s, forever; /endless: 64 KiB blocks, forever; /huge: says
    Content-Length 10 GiB; /ok: a small file."""

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.send_response(200)
        if self.path == "/huge":
            self.send_header("Content-Length", str(10 << 30))
        if self.path == "/ok":
            self.send_header("Content-Length", "3")
        self.end_headers()
        with contextlib.suppress(OSError):
            if self.path == "/ok":
                self.wfile.write(b"abc")
                return
            block = b"x" if self.path == "/trickle" else b"\0" * (64 << 10)
            while not self.server.stopping.is_set():
                self.wfile.write(block)
                self.wfile.flush()
                if self.path == "/trickle":
                    time.sleep(0.2)

    def log_message(self, *args):
        pass


@pytest.fixture
def bad_server(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    httpd.stopping = threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def yml(tmp_path):
    path = tmp_path / "deploy.yml"
    path.write_text("library_name: x\n")
    return path


def _fails(url, yml, downloads, *needles):
    start = time.monotonic()
    with pytest.raises(ConfigError) as info:
        fetch(url, SHA, KEY, yml, downloads)
    for n in needles:
        assert n in str(info.value), str(info.value)
    assert not downloads.exists() or list(downloads.iterdir()) == []      # no .download.* left behind
    return time.monotonic() - start


def test_a_trickling_server_meets_the_overall_deadline(tmp_path, yml, bad_server, monkeypatch):
    monkeypatch.setenv("MACE_DOWNLOAD_DEADLINE_S", "1.5")
    took = _fails(f"{bad_server}/trickle", yml, tmp_path / "dl", f"{KEY}: cannot download",
                  "not finished after 1.5 s", "MACE_DOWNLOAD_DEADLINE_S")
    assert took < 10   # the per-read timeout alone would never fire: a byte comes every 0.2 s


def test_an_endless_body_meets_the_size_limit(tmp_path, yml, bad_server, monkeypatch):
    monkeypatch.setenv("MACE_MAX_DOWNLOAD_BYTES", "1M")
    took = _fails(f"{bad_server}/endless", yml, tmp_path / "dl", "more than 1048576 bytes",
                  "MACE_MAX_DOWNLOAD_BYTES")
    assert took < 10


def test_a_huge_content_length_is_refused_before_reading(tmp_path, yml, bad_server):
    _fails(f"{bad_server}/huge", yml, tmp_path / "dl", f"announces {10 << 30} bytes",
           f"the limit of {fetch_mod.DOWNLOAD_LIMIT}")


def test_bad_limit_values_are_clear_errors(tmp_path, yml, bad_server, monkeypatch):
    monkeypatch.setenv("MACE_DOWNLOAD_DEADLINE_S", "nan")
    _fails(f"{bad_server}/ok", yml, tmp_path / "dl", "MACE_DOWNLOAD_DEADLINE_S='nan'")


def test_partial_downloads_of_dead_processes_are_removed(tmp_path, yml, bad_server):
    downloads = tmp_path / "dl"
    downloads.mkdir()
    dead = downloads / ".download.999999999.abc"       # no pid is that large: its process is gone
    live = downloads / f".download.{os.getpid()}.xyz"   # a download running now (this process)
    dead.write_bytes(b"partial")
    live.write_bytes(b"partial")
    url = f"{bad_server}/ok"
    path = fetch(url, hashlib.sha256(b"abc").hexdigest(), KEY, yml, downloads)
    assert path.read_bytes() == b"abc"
    assert sorted(p.name for p in downloads.iterdir()) == sorted([path.name, live.name])


def test_convert_from_an_endless_url_fails_cleanly(tmp_path, bad_server):
    work = workdir(tmp_path)
    model = digits_model(model_file_path=f"{bad_server}/endless", model_sha256_checksum=SHA)
    write_deployment(work / "url.yml", {"digits_cnn": model})
    env = dict(no_proxy_env(), MACE_MAX_DOWNLOAD_BYTES="2M")
    r = cli("convert", "--config=url.yml", "--build_dir=out", cwd=work, env=env, timeout=60)
    _one_error(r, "models.digits_cnn.model_file_path: cannot download", "more than 2097152 bytes")
    assert list((work / "out").rglob(".download.*")) == []


@pytest.mark.parametrize("planted", ["fifo", "dev_zero"])
def test_a_fifo_or_dev_zero_in_the_download_cache_is_replaced(tmp_path, yml, bad_server, planted):
    """Issue 38: the cached copy was hashed with a blocking open (a FIFO waited forever, /dev/zero
    was read without end); now only a regular file counts as cached, and the download replaces it."""
    url, downloads = f"{bad_server}/ok", tmp_path / "dl"
    downloads.mkdir()
    cached = downloads / (hashlib.md5(url.encode()).hexdigest())
    if planted == "fifo":
        _fifo(cached)
    else:
        cached.symlink_to("/dev/zero")
    path = fetch(url, hashlib.sha256(b"abc").hexdigest(), KEY, yml, downloads)
    assert path == cached and path.is_file() and not path.is_symlink() and path.read_bytes() == b"abc"


def test_a_url_without_sha256_stops_at_the_size_limit(tmp_path, yml, bad_server, monkeypatch):
    """Issue 38: with no sha256 the download only serves to print one; it still stops at the limit."""
    monkeypatch.setenv("MACE_MAX_DOWNLOAD_BYTES", "1M")
    downloads = tmp_path / "dl"
    start = time.monotonic()
    with pytest.raises(ConfigError, match="more than 1048576 bytes"):
        fetch(f"{bad_server}/endless", None, KEY, yml, downloads)
    assert time.monotonic() - start < 10 and list(downloads.iterdir()) == []
    with pytest.raises(ConfigError, match=f"models.m.model_sha256_checksum: required; the sha256 of .* is "
                                          f"{hashlib.sha256(b'abc').hexdigest()}"):
        fetch(f"{bad_server}/ok", None, KEY, yml, downloads)
