"""Helpers of the device tests: work folders, builds, devices .yml files, target Pythons."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy
import yaml

from tests.cli_helpers import cli, digits_model, workdir, write_deployment


def make_venv(folder: Path, with_numpy: bool) -> Path:
    """A venv of this interpreter without pip; with numpy linked in, it has numpy and nothing else."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=60)
    python = folder / "bin" / "python"
    if with_numpy:
        site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   check=True, capture_output=True, text=True).stdout.strip())
        installed = Path(numpy.__file__).parent.parent
        for entry in [installed / "numpy", installed / "numpy.libs", *installed.glob("numpy-*.dist-info")]:
            if entry.exists():
                (site / entry.name).symlink_to(entry)
    return python


def board_work(tmp_path: Path, abis=("host",)) -> Path:
    """tmp_path/work: the digits example with a deployment file deploy.yml for `abis` (`host`: the
    loopback board is this machine's CPU, so it runs the host build, picked with --device=board)."""
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model()}, target_abis=list(abis))
    return work


def build(work: Path, config: str = "deploy.yml", env=None):
    r = cli("build", f"--config={config}", "--build_dir=out", cwd=work, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def write_devices(path: Path, **devices) -> Path:
    path.write_text(yaml.safe_dump({"devices": devices}, sort_keys=False))
    return path


def ssh_entry(server, work_dir: Path, python, **overrides) -> dict:
    """A devices .yml entry for the test sshd: a board of this machine's CPU (`host`), unless its
    python is an ARM one (test_arm_boards.py)."""
    entry = {"target_abis": ["host"], "target_socs": "RK3399", "models": "Test Board",
             "address": "127.0.0.1", "port": server.port, "username": server.user,
             "identity_file": str(server.key), "python": str(python), "work_dir": str(work_dir)}
    entry.update(overrides)
    return entry


def no_adb_env() -> dict:
    """os.environ with a PATH on which no adb is found (the machine may have a real one)."""
    paths = [p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "adb").exists()]
    return dict(os.environ, PATH=os.pathsep.join(paths))


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


def fails(r, *needles):
    """One clear error: exit 1, no traceback, every needle in stderr."""
    assert r.returncode == 1, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, f"{n!r} not in:\n{r.stderr}"
    return r
