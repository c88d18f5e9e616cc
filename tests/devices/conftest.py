"""Fixtures of the device tests: an sshd on 127.0.0.1, the stand-in adb, target Pythons."""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import pytest

from tests.devices.helpers import make_venv
from tests.devices.ssh_server import ensure_sshd, ssh_server

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def numpy_only_python(tmp_path_factory) -> Path:
    """A Python with numpy and nothing else: what the device needs."""
    return make_venv(tmp_path_factory.mktemp("numpy-only"), with_numpy=True)


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory) -> Path:
    """A Python without numpy."""
    return make_venv(tmp_path_factory.mktemp("bare"), with_numpy=False)


def _sshd(tmp_path_factory, sftp: bool):
    reason = ensure_sshd()
    if reason:
        print(f"\nskipping the ssh device tests: {reason}", file=sys.stderr)
        pytest.skip(reason)
    with ssh_server(tmp_path_factory.mktemp("sshd"), sftp=sftp) as server:
        yield server
    _remove_locks(f"mace-device-ssh-*-{server.port}.lock")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    yield from _sshd(tmp_path_factory, sftp=True)


@pytest.fixture(scope="session")
def sshd_no_sftp(tmp_path_factory):
    """An sshd without the sftp subsystem: a board where scp must use its legacy protocol."""
    yield from _sshd(tmp_path_factory, sftp=False)


def _remove_locks(pattern: str) -> None:
    """The lock files the tests made (free by now): no litter in the temp folder."""
    for path in Path(tempfile.gettempdir()).glob(pattern):
        path.unlink(missing_ok=True)


# The stand-in's "phones" run this machine's Python, so they are what they would be for real: emulators of
# this machine's CPU (an x86_64 emulator's abilist), which run the host build (docs/devices.md)
EMULATOR_ABIS = {"x86_64": "x86_64,x86", "i686": "x86"}.get(platform.machine(), platform.machine())


@pytest.fixture
def fake_adb(tmp_path, numpy_only_python, monkeypatch):
    """The stand-in adb first on PATH (python3 there is the numpy-only one; its phones are emulators of
    this machine's CPU).
    Returns (env for the CLI, the phones' home folder, add_phone(serial, ...)).

    Device locks live in the temp dir, shared by every process of the machine: the phones
    here get a private one, so another test run on this machine never holds their locks."""
    bin_dir, home, locks = tmp_path / "bin", tmp_path / "adb-home", tmp_path / "locks"
    bin_dir.mkdir()
    home.mkdir()
    locks.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(locks))  # is_locked() in the test looks here
    adb = bin_dir / "adb"
    adb.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'fake_adb.py'} \"$@\"\n")
    adb.chmod(0o755)
    (bin_dir / "python3").symlink_to(numpy_only_python)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_ADB_HOME=str(home),
               TMPDIR=str(locks))
    phones = {}

    def add_phone(serial, model="Pixel 6", soc="gs101", abis=EMULATOR_ABIS, state="device"):
        phones[serial] = {"state": state, "props": {"ro.product.model": model, "ro.board.platform": soc,
                                                    "ro.product.cpu.abilist": abis}}
        (home / "devices.json").write_text(json.dumps(phones))
        return home / serial

    (home / "devices.json").write_text("{}")
    yield env, home, add_phone
    for serial in phones:
        _remove_locks(f"mace-device-adb-{serial}.lock")


def _arm_python(arch: str) -> Path:
    from tests.devices.arm_board import arm_python

    python, reason = arm_python(arch)
    if reason:
        print(f"\nskipping the {arch} board tests: {reason}", file=sys.stderr)
        pytest.skip(reason)
    return python


@pytest.fixture(scope="session")
def aarch64_python() -> Path:
    """Debian's aarch64 python3 with numpy's manylinux wheel, under qemu-aarch64-static (arm_board.py)."""
    return _arm_python("aarch64")


@pytest.fixture(scope="session")
def armhf_python() -> Path:
    """Debian's armhf python3 with Debian's python3-numpy, under qemu-arm-static (arm_board.py)."""
    return _arm_python("armhf")


@pytest.fixture(scope="session")
def aarch64_numba_python() -> Path:
    """The aarch64 board with PyPI's aarch64 numba and llvmlite wheels (arm_board.arm_numba_python)."""
    from tests.devices.arm_board import arm_numba_python

    python, reason = arm_numba_python()
    if reason:
        print(f"\nskipping the aarch64 numba board tests: {reason}", file=sys.stderr)
        pytest.skip(reason)
    return python
