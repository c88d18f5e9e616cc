"""The first run compiles the fast kernels (numba) for a while: it says so, once, before it
starts; a run that loads them from numba's cache says nothing."""
from __future__ import annotations

import os

import pytest

from tests.cli_helpers import cli, workdir

pytest.importorskip("numba")
NOTE = "note: compiling the fast CPU kernels with numba"


def test_a_cold_cache_is_announced_and_a_warm_one_is_not(tmp_path):
    work = workdir(tmp_path)
    assert cli("convert", "--config=deploy.yml", cwd=work).returncode == 0
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))   # empty: cold
    env.pop("MACE_NO_JIT", None)
    first = cli("run", "--config=deploy.yml", cwd=work, env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(NOTE) == 1 and str(tmp_path / "numba-cache") in first.stderr
    second = cli("run", "--config=deploy.yml", cwd=work, env=env)
    assert second.returncode == 0 and NOTE not in second.stderr, second.stderr
