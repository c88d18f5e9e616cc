"""The distribution's name and the install hints: `pymace` on PyPI is an unrelated project, so we
are `mace-converter`; every hint names a command that works from where the user stands (an
editable checkout: `pip install -e '.[images]'`; an installed wheel: `pip install
'mace-converter[images]'`), and the wheel installs and converts in a clean venv."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from mace.util import invocation
from mace.util.invocation import DISTRIBUTION, install_hint, pip_command

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_distribution_is_ours_and_keeps_the_package_and_the_script():
    assert PROJECT["name"] == DISTRIBUTION != "pymace"
    assert PROJECT["scripts"] == {"mace-converter": "mace.cli.main:main"}
    assert all(dep.startswith(f"{DISTRIBUTION}[") for dep in PROJECT["optional-dependencies"]["all"])


def test_no_file_tells_users_to_install_the_taken_name():
    texts = [*ROOT.glob("mace/**/*.py"), *ROOT.glob("tools/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md",
             *ROOT.glob("setup/*"), *ROOT.glob("docker/*")]
    bad = [str(p.relative_to(ROOT)) for p in texts if p.is_file() and re.search(r"pymace\[|install pymace\b",
                                                                                p.read_text(errors="replace"))]
    assert not bad


def test_every_hint_in_the_code_names_an_extra_that_exists():
    used = set()
    for path in ROOT.glob("mace/**/*.py"):
        used |= set(re.findall(r"""install_hint\(\s*['"]([^'"]+)['"]""", path.read_text()))
    assert used and used <= set(PROJECT["optional-dependencies"]), used - set(PROJECT["optional-dependencies"])


def test_in_the_checkout_the_hint_installs_the_checkout_editable(monkeypatch, tmp_path):
    assert invocation.checkout_root() == ROOT
    monkeypatch.chdir(ROOT)
    assert install_hint("images") == f"{pip_command()} install -e '.[images]'"
    monkeypatch.chdir(tmp_path)   # elsewhere: the checkout by its path
    words = shlex.split(install_hint("gpu"))
    assert words[-3:] == ["install", "-e", f"{ROOT}[gpu]"]


def test_pip_and_python_are_the_ones_running(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))   # no python or pip on PATH
    assert invocation.python_command() == shlex.quote(invocation.shown_path(sys.executable, command=True))
    assert invocation.pip_command() == f"{invocation.python_command()} -m pip"
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{tmp_path}")
    assert invocation.python_command() == Path(sys.executable).name
    if (Path(sys.executable).parent / "pip").exists():
        assert invocation.pip_command() == "pip"


def _deps_folder(folder: Path) -> Path:
    """Links to everything this interpreter has installed except mace itself: a clean venv gets
    the dependencies from it without a download, and only the wheel provides `mace`."""
    folder.mkdir()
    ours = re.compile(r"^(mace|pymace|mace_converter|__editable__)", re.I)
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if not ours.match(entry.name) and not entry.name.endswith(".pth"):
            (folder / entry.name).symlink_to(entry)
    return folder


def _run(cmd, cwd, **kw):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{cmd}\nexit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_the_wheel_installs_in_a_clean_venv_and_converts(tmp_path):
    """`pip wheel`, then `pip install dist/*.whl` in a new venv and the quick start's convert; the
    hints there name the distribution, and running one (offline) works."""
    src = tmp_path / "src"   # a copy: building in the checkout would leave build/ and *.egg-info there
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "mace", src / "mace", ignore=shutil.ignore_patterns("__pycache__"))
    try:
        import setuptools  # noqa: F401 - the build backend, in this environment: nothing to download
        isolation = ["--no-build-isolation"]
    except ImportError:
        isolation = []
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-w", str(tmp_path / "dist"), "./src"],
         cwd=tmp_path)
    wheel, = (tmp_path / "dist").glob("mace_converter-*.whl")
    with zipfile.ZipFile(wheel) as z:   # MACE's script path inside mace/ is a checkout's shim only
        assert not [n for n in z.namelist() if n.startswith("mace/python/")]

    venv = tmp_path / "venv"
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                        cwd=tmp_path).stdout.strip())
    (purelib / "deps.pth").write_text(f"{_deps_folder(tmp_path / 'deps')}\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
         cwd=tmp_path)

    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples" / "digits", work / "examples" / "digits",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    _run(["mace-converter", "convert", "--config=examples/digits/digits.yml"], cwd=work, env=env)
    assert (work / "builds/digits/model/digits_cnn.pb").is_file()

    where = _run(["python", "-c", "import mace.util.invocation as i, mace; print(mace.__file__); "
                  "print(i.install_hint('images')); print(i.converter_command())"], cwd=work, env=env)
    module, hint, converter = where.stdout.strip().splitlines()
    assert Path(module).is_relative_to(purelib)
    assert hint == f"python -m pip install '{DISTRIBUTION}[images]'" and converter == "mace-converter"
    _run(["/bin/sh", "-c", f"{hint} --no-index"], cwd=work, env=env)   # the deps are there: offline

    # the copy as a checkout: mace imported from it, the hint installs it editable
    hint = _run(["python", "-c", "import mace.util.invocation as i; print(i.install_hint('images'))"],
                cwd=src, env=env).stdout.strip()
    assert hint == "python -m pip install -e '.[images]'"
    _run(["/bin/sh", "-c", f"{hint} --no-index {' '.join(isolation)}"], cwd=src, env=env)
    moved = _run(["python", "-c", "import mace; print(mace.__file__)"], cwd=work, env=env).stdout.strip()
    assert Path(moved) == src / "mace" / "__init__.py"
