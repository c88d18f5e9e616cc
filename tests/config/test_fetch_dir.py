"""The checksum of a model directory (a TensorFlow SavedModel) is the documented shell line's."""
import shutil
import subprocess

import pytest

from mace.config.fetch import sha256_of


def test_directory_checksum_matches_the_shell_line(tmp_path):
    if not all(shutil.which(t) for t in ("find", "sort", "xargs", "sha256sum")):
        pytest.skip("needs find, sort, xargs and sha256sum")
    model = tmp_path / "saved"
    (model / "variables").mkdir(parents=True)
    (model / "assets").mkdir()
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.index").write_bytes(b"index")
    (model / "variables" / "variables.data-00000-of-00001").write_bytes(b"\x00" * 100)
    (model / "Z_upper.txt").write_text("byte order: 'Z' sorts before 'a'")
    line = "find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum"
    shell = subprocess.run(["bash", "-c", line], cwd=model, capture_output=True, text=True, check=True)
    assert sha256_of(model) == shell.stdout.split()[0]


def test_directory_checksum_changes_with_any_file(tmp_path):
    (tmp_path / "a").write_text("1")
    before = sha256_of(tmp_path)
    (tmp_path / "b").write_text("2")
    assert sha256_of(tmp_path) != before
