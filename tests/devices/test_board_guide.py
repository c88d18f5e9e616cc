"""docs/test_board.md works as written: its commands make an sshd on 127.0.0.1, its devices .yml
(filled in for this machine) names it, and `build` + `run --validate` run the digits model there."""
from __future__ import annotations

import getpass
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import ROOT, cli
from tests.devices.helpers import board_work, no_adb_env, ok
from tests.devices.ssh_server import ensure_sshd, free_port

GUIDE = ROOT / "docs" / "test_board.md"
FIRST_LINE = 'BOARD="$HOME/mace-test-board"  PORT=2222'


def _blocks(kind: str) -> list:
    return re.findall(rf"```{kind}\n(.*?)```", GUIDE.read_text(), re.S)


def test_the_guide_makes_a_board_that_runs_a_model(tmp_path, numpy_only_python):
    reason = ensure_sshd()
    if reason:
        pytest.skip(reason)
    make = _blocks("bash")[0]
    assert make.startswith(FIRST_LINE), "the guide's first command changed: update this test"
    board, port = tmp_path / "board", free_port()
    script = f'BOARD="{board}"  PORT={port}' + make[len(FIRST_LINE):]
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        entry = yaml.safe_load(_blocks("yaml")[0])["devices"]["testboard"]
        entry.update(port=port, username=getpass.getuser(), identity_file=str(board / "id_board"),
                     python=str(numpy_only_python), work_dir=str(tmp_path / "remote"))
        work = board_work(tmp_path)
        (work / "devices.yml").write_text(yaml.safe_dump({"devices": {"testboard": entry}}))
        ok(cli("build", "--config=deploy.yml", cwd=work))
        for _ in range(50):   # sshd forked into the background: wait until it listens
            if (board / "sshd.pid").exists():
                break
            time.sleep(0.1)
        r = ok(cli("run", "--config=deploy.yml", "--device_yml=devices.yml", "--device=testboard", "--validate",
                   cwd=work, env=no_adb_env()))
        assert "Run model digits_cnn on testboard" in r.stdout
        assert "--device=testboard --validate" in _blocks("bash")[1]   # the guide's run: the board by name
    finally:
        pid = board / "sshd.pid"
        if pid.exists():
            os.kill(int(pid.read_text()), signal.SIGTERM)
        for lock in Path(tempfile.gettempdir()).glob(f"mace-device-ssh-*-{port}.lock"):
            lock.unlink(missing_ok=True)


def test_the_arm_recipe_downloads_what_the_test_boards_use():
    # the by-hand recipe and tests/devices/arm_board.py make the same board (run by hand: it
    # printed "aarch64 2.4.6"); a package added to one is added to the other
    from tests.devices.arm_board import ARCHES, LIBRARIES

    text = GUIDE.read_text()
    recipe = next(b for b in _blocks("bash") if "qemu-aarch64-static" in b)
    for package in ["python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", *LIBRARIES]:
        assert re.search(rf"(?<![\w.-]){re.escape(package)}(?![\w.-])", recipe), package
    for package in ARCHES["armv7l"]["debs"]:
        assert package in text, package
    assert "PYTHONHOME" in recipe and "-L" in recipe and "Emulated timings are not performance numbers" in text
