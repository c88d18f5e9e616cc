"""What the README and the docs state about the product, checked against the product: the
platforms a deployment file takes, the system packages the test command installs."""
from __future__ import annotations

import re
from pathlib import Path

from mace.frontends import FRONTENDS

ROOT = Path(__file__).resolve().parents[2]


def _text(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())   # one line: sentences wrap anywhere


def test_deployment_file_doc_lists_every_platform():
    sentence = re.search(r"`platform` is (.*?)\. ", _text("docs/deployment_file.md")).group(1)
    assert set(re.findall(r"`(\w+)`", sentence)) >= set(FRONTENDS)


def test_readme_names_each_system_package_the_test_command_installs():
    script = (ROOT / "setup" / "test.sh").read_text()
    packages = set(re.findall(r"missing\+=\((\S+)\)", script))
    assert packages == {"pocl-opencl-icd", "openssh-server", "qemu-user-static", "chromium", "python3-dev"}, packages
    readme = _text("README.md")
    for package in packages:
        assert f"`{package}`" in readme, package
    assert re.search(r"setup/test.sh` takes about \d+(-\d+)? minutes on \d+ cores", readme)
    assert "python tools/converter.py warmup" in readme and "says so on one line" in readme   # the first run's wait, said
