"""mace.config.fetch: local lookup, sha256 checks, and URL downloads (a real local HTTP server)."""
from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from mace.config.fetch import fetch, local_path, sha256_of, verify
from mace.errors import ChecksumError, ConfigError

PAYLOAD = b"not really an onnx model, but bytes with a known checksum\n" * 16
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()
KEY = "models.m.model_file_path"


@pytest.fixture
def yml(tmp_path):
    conf = tmp_path / "conf" / "deploy.yml"
    conf.parent.mkdir()
    conf.write_text("library_name: x\n")
    return conf


@pytest.fixture
def no_proxy(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


class _CountingHandler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's naming
        self.server.requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server(tmp_path, no_proxy):
    """http.server on 127.0.0.1 serving tmp_path/www; yields (base_url, www dir, request log)."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(_CountingHandler, directory=str(www))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.requests = []
    httpd.timeout = 5
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", www, httpd.requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
        assert not thread.is_alive()


# ---- checksums ---------------------------------------------------------------------
def test_sha256_of_matches_hashlib(tmp_path):
    f = tmp_path / "m.onnx"
    f.write_bytes(PAYLOAD)
    assert sha256_of(f) == PAYLOAD_SHA


def test_verify_accepts_matching_checksum(tmp_path, yml):
    f = tmp_path / "m.onnx"
    f.write_bytes(PAYLOAD)
    verify(f, PAYLOAD_SHA, KEY, yml)


def test_checksum_mismatch_shows_both_sums(tmp_path, yml):
    f = tmp_path / "m.onnx"
    f.write_bytes(PAYLOAD)
    wrong = "0" * 64
    with pytest.raises(ChecksumError) as info:
        fetch(str(f), wrong, KEY, yml, tmp_path / "downloads")
    msg = str(info.value)
    assert str(yml) in msg
    assert "models.m.model_sha256_checksum" in msg
    assert f"expected: {wrong}" in msg
    assert f"actual:   {PAYLOAD_SHA}" in msg
    assert f.read_bytes() == PAYLOAD  # a local file is never deleted


@pytest.mark.parametrize("checksum", [None, ""])
def test_missing_checksum_shows_the_actual_sum(tmp_path, yml, checksum):
    f = tmp_path / "m.onnx"
    f.write_bytes(PAYLOAD)
    with pytest.raises(ConfigError) as info:
        fetch(str(f), checksum, KEY, yml, tmp_path / "downloads")
    msg = str(info.value)
    assert "models.m.model_sha256_checksum: required" in msg
    assert PAYLOAD_SHA in msg


def test_weight_checksum_key_is_named(tmp_path, yml):
    f = tmp_path / "w.caffemodel"
    f.write_bytes(PAYLOAD)
    with pytest.raises(ChecksumError, match=r"models\.m\.weight_sha256_checksum"):
        fetch(str(f), "1" * 64, "models.m.weight_file_path", yml, tmp_path / "downloads")


# ---- local lookup --------------------------------------------------------------------
def test_relative_path_found_in_cwd_first(tmp_path, yml, monkeypatch):
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "m.onnx").write_bytes(PAYLOAD)
    (yml.parent / "m.onnx").write_bytes(b"the other one")
    monkeypatch.chdir(cwd)
    path = fetch("m.onnx", PAYLOAD_SHA, KEY, yml, tmp_path / "downloads")
    assert path.resolve() == (cwd / "m.onnx").resolve()
    assert local_path("m.onnx", yml.parent) == Path("m.onnx")


def test_relative_path_found_next_to_the_yml(tmp_path, yml, monkeypatch):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    (yml.parent / "sub").mkdir()
    (yml.parent / "sub" / "m.onnx").write_bytes(PAYLOAD)
    monkeypatch.chdir(cwd)
    path = fetch("sub/m.onnx", PAYLOAD_SHA, KEY, yml, tmp_path / "downloads")
    assert path == yml.parent / "sub" / "m.onnx"


def test_absolute_path(tmp_path, yml):
    f = tmp_path / "abs.onnx"
    f.write_bytes(PAYLOAD)
    assert fetch(str(f), PAYLOAD_SHA, KEY, yml, tmp_path / "downloads") == f


def test_missing_local_file_names_key_and_value(tmp_path, yml, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        fetch("missing/m.onnx", PAYLOAD_SHA, KEY, yml, tmp_path / "downloads")
    msg = str(info.value)
    assert str(yml) in msg and KEY in msg and "file not found: missing/m.onnx" in msg
    assert not (tmp_path / "downloads").exists()


def test_directory_is_not_a_model_file(tmp_path, yml):
    (tmp_path / "d.onnx").mkdir()
    with pytest.raises(ConfigError, match="not a regular file"):
        fetch(str(tmp_path / "d.onnx"), PAYLOAD_SHA, KEY, yml, tmp_path / "downloads")


# ---- URLs ------------------------------------------------------------------------------
def test_url_downloaded_once_and_reused(tmp_path, yml, server):
    base, www, requests = server
    (www / "model.onnx").write_bytes(PAYLOAD)
    url = f"{base}/model.onnx"
    downloads = tmp_path / "builds" / "downloads"
    expected = downloads / (hashlib.md5(url.encode()).hexdigest() + ".onnx")

    path = fetch(url, PAYLOAD_SHA, KEY, yml, downloads)
    assert path == expected
    assert path.read_bytes() == PAYLOAD
    assert requests == ["/model.onnx"]

    again = fetch(url, PAYLOAD_SHA, KEY, yml, downloads)
    assert again == expected
    assert requests == ["/model.onnx"]          # served from builds/downloads, no second request
    assert sorted(p.name for p in downloads.iterdir()) == [expected.name]  # no temp files left


def test_corrupt_cached_download_is_fetched_again(tmp_path, yml, server):
    base, www, requests = server
    (www / "model.onnx").write_bytes(PAYLOAD)
    url = f"{base}/model.onnx"
    downloads = tmp_path / "downloads"
    cached = downloads / (hashlib.md5(url.encode()).hexdigest() + ".onnx")
    downloads.mkdir()
    cached.write_bytes(b"truncated")
    assert fetch(url, PAYLOAD_SHA, KEY, yml, downloads).read_bytes() == PAYLOAD
    assert len(requests) == 1


def test_url_checksum_mismatch_deletes_the_download(tmp_path, yml, server):
    base, www, requests = server
    (www / "model.onnx").write_bytes(PAYLOAD)
    url = f"{base}/model.onnx"
    downloads = tmp_path / "downloads"
    wrong = "f" * 64
    with pytest.raises(ChecksumError) as info:
        fetch(url, wrong, KEY, yml, downloads)
    msg = str(info.value)
    assert wrong in msg and PAYLOAD_SHA in msg
    assert list(downloads.iterdir()) == []
    assert requests == ["/model.onnx"]


def test_url_without_checksum_is_not_kept(tmp_path, yml, server):
    base, www, _ = server
    (www / "model.onnx").write_bytes(PAYLOAD)
    downloads = tmp_path / "downloads"
    with pytest.raises(ConfigError, match=PAYLOAD_SHA):
        fetch(f"{base}/model.onnx", None, KEY, yml, downloads)
    assert list(downloads.iterdir()) == []


def test_url_not_found_is_a_config_error(tmp_path, yml, server):
    base, _, requests = server
    downloads = tmp_path / "downloads"
    with pytest.raises(ConfigError) as info:
        fetch(f"{base}/missing.onnx", PAYLOAD_SHA, KEY, yml, downloads)
    msg = str(info.value)
    assert KEY in msg and "cannot download" in msg and "404" in msg
    assert list(downloads.iterdir()) == []  # the temporary file is removed too
    assert requests == ["/missing.onnx"]


def test_unreachable_server_is_a_config_error(tmp_path, yml, no_proxy):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match="cannot download"):
        fetch(f"http://127.0.0.1:{port}/m.onnx", PAYLOAD_SHA, KEY, yml, tmp_path / "downloads")


def test_malformed_url_is_a_config_error(tmp_path, yml, no_proxy):
    with pytest.raises(ConfigError, match="cannot download"):
        fetch("http://127.0.0.1:notaport/m.onnx", PAYLOAD_SHA, KEY, yml, tmp_path / "downloads")
