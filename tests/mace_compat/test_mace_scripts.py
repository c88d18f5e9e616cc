"""MACE's script paths (mace/cli/mace_scripts.py) typed as MACE's docs type them, from the
checkout's root: the shims do the work through our CLI, the others name what replaces them;
docs/mace_compat.md lists every one."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mace.cli.mace_compat_doc import DOC
from mace.cli.mace_scripts import SCRIPTS, convert_argv, run_model_argv
from mace.quantize.stat import stat_line
from tests.cli_helpers import ROOT, workdir

SHIMS = [s for s in SCRIPTS if s.kind == "shim"]
ERRORS = [s for s in SCRIPTS if s.kind == "error"]


def _mace(path: str, *args, cwd=ROOT):
    """As MACE's docs run it: `python PATH ...` / `bash PATH ...`, the checkout's root as cwd."""
    runner = ["bash"] if path.endswith(".sh") else [sys.executable]
    return subprocess.run([*runner, str(ROOT / path) if cwd != ROOT else path, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_every_path_is_there_and_in_the_doc():
    doc = DOC.read_text()
    for s in SCRIPTS:
        assert (ROOT / s.path).is_file() == (s.kind != "listed"), s.path
        assert f"| `{s.path}` |" in doc, s.path
    shipped = {str(p.relative_to(ROOT)) for d in ("tools/python", "tools/cmake", "tools/image", "mace/python")
               for p in (ROOT / d).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert shipped <= {s.path for s in SCRIPTS}   # no shim outside the table


@pytest.mark.parametrize("script", ERRORS, ids=lambda s: s.path)
def test_a_script_with_no_equivalent_names_ours(script):
    r = _mace(script.path, "--config=deploy.yml")
    assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
    line, = r.stderr.strip().splitlines()
    assert line.startswith(f"error: {script.path} is MACE's; here: ") and "Traceback" not in r.stderr
    for named in ("tools/converter.py", "setup/test.sh", "benchmarks/bench_ops.py"):
        if named in line:
            assert (ROOT / named).is_file(), named


@pytest.mark.parametrize("path", ["tools/python/quantize/quantize_stat.py",
                                  "mace/python/tools/quantization/quantize_stat.py"])
def test_quantize_stat_at_maces_paths_is_ours(path, tmp_path):
    log = tmp_path / "range_log"
    log.write_text("\n".join([stat_line("x", -1.0, 2.0), stat_line("x", -3.0, 1.0),
                              stat_line("scope/y:0", 0.0, 6.0)]) + "\n")
    ours = _mace("tools/quantize_stat.py", "--log_file", log)
    theirs = _mace(path, "--log_file", log)
    assert theirs.returncode == 0 and ours.returncode == 0, theirs.stderr
    assert theirs.stdout == ours.stdout and "x@@-3" in theirs.stdout


def test_convert_and_run_model_at_maces_paths(tmp_path):
    work = workdir(tmp_path)
    r = _mace("tools/python/convert.py", "--config", "deploy.yml", "--output", "build", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (work / "build/digits/model/digits_cnn.pb").is_file()
    r = _mace("tools/python/run_model.py", "--config", "deploy.yml", "--output=build", "--validate",
              "--build_dir", "build/cmake-build", "--round=2", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--build_dir has no effect here" in r.stderr and "digits_cnn" in r.stdout
    r = _mace("tools/python/run_model.py", "--config=deploy.yml", "--validate_threshold=0.9", cwd=work)
    assert r.returncode == 1 and "`validation_threshold:` in the deployment file" in r.stderr
    r = _mace("tools/python/converter.py", "run", "--config=deploy.yml", "--build_dir=build", cwd=work)
    assert r.returncode == 0, r.stderr


def test_run_model_flags_translate():
    assert run_model_argv(["--config", "a.yml", "--target_abi", "arm64", "--device_conf=d.yml", "--gencode_model",
                           "--tune", "--round=5"]) == \
        [["run", "--config", "a.yml", "--target_abis=arm64", "--device_yml=d.yml", "--model_graph_format=code",
          "--tuning", "--round=5"]]
    build, run = run_model_argv(["--config=a.yml", "--build", "--output", "out", "--validate"])
    assert build == ["build", "--config=a.yml", "--build_dir=out"] and run[-1] == "--validate"
    assert convert_argv(["--config=a.yml", "--output", "o"]) == [["convert", "--config=a.yml", "--build_dir=o"]]


def test_shell_shims_need_no_dependencies(tmp_path):
    """An error shim runs on a python3 without numpy (the system's, not the venv's)."""
    env = dict(os.environ, PYTHONNOUSERSITE="1")
    bare = tmp_path / "bin"
    bare.mkdir()
    base = Path(getattr(sys, "_base_executable", sys.executable))
    (bare / "python3").symlink_to(base)
    env["PATH"] = f"{bare}{os.pathsep}{env['PATH']}"
    r = subprocess.run(["bash", "tools/cmake/cmake-build-host.sh"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "no native library to build" in r.stderr, r.stderr
