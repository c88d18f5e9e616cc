"""examples/digits/make_model.py on this machine: it trains (numpy float arithmetic, whose last
bits depend on the CPU and BLAS), pins the sha256 of the model it wrote into the deployment files
naming it, and the CLI converts and validates the new model."""
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits"
HEX64 = re.compile(r"\b[0-9a-f]{64}\b")


def test_make_model_pins_its_model_and_the_cli_validates_it(tmp_path):
    pytest.importorskip("sklearn", reason="the digits data set ships with scikit-learn (the [example] extra)")
    work = tmp_path / "examples" / "digits"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__", "*.onnx"))
    made = subprocess.run([sys.executable, str(work / "make_model.py")], capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    digest = hashlib.sha256((work / "digits_cnn.onnx").read_bytes()).hexdigest()
    for name in ("digits.yml", "digits_accuracy.yml"):
        text, shipped = (work / name).read_text(), (EXAMPLE / name).read_text()
        assert f"model_sha256_checksum: {digest}\n" in text, name
        assert HEX64.sub("", text) == HEX64.sub("", shipped), name   # that value only: comments kept
        assert f"{name}: models.digits_cnn.model_sha256_checksum: " in made.stdout
    r = cli("convert", "--config=examples/digits/digits.yml", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("run", "--config=examples/digits/digits.yml", "--validate", cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and "Similarity test passed" in r.stdout, r.stdout + r.stderr
