"""The generated package imports and runs with only the runtime: a fresh venv (no system site
packages, no pip) holding numpy and protobuf, and a deploy folder holding the generated package
beside copies of mace's runtime subpackages (mace.runtime, .ir, .ops, .proto). numpy and protobuf
are installed by copying their installed distributions (package + .dist-info) from this
interpreter's site-packages: the same wheels pip would unpack, with no network or pip cache."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import google.protobuf
import numpy as np

import mace
from mace.config.files import code_dir
from mace.runtime.from_code import create_engine_from_package
from tests.codegen.helpers import convert, digits_models, inputs_for, squeezenet_models

RUNTIME = ["__init__.py", "_blas.py", "errors.py", "runtime", "ir", "ops", "proto", "quantize", "util"]
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")

SCRIPT = """
import importlib, sys
import numpy as np
for absent in ("jinja2", "onnx", "yaml", "mace.convert", "mace.frontends", "mace.codegen"):
    try:
        importlib.import_module(absent)
    except ImportError:
        continue
    sys.exit(absent + " is importable: not a clean environment")
from {package} import MODELS, create_engine_from_code
engine = create_engine_from_code({model!r})
inputs = dict(np.load("inputs.npz"))
np.savez("outputs.npz", **engine.run(inputs))
print("ran", MODELS, np.__file__)
"""


def _site_packages(env: Path) -> Path:
    if os.name == "nt":
        return env / "Lib" / "site-packages"
    return env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def _install_copy(site: Path, top: Path, names) -> None:
    """Copy installed packages and their dist-info from `top` (a site-packages folder)."""
    for pattern in names:
        for src in sorted(top.glob(pattern)):
            dest = site / src.relative_to(top)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, dest, ignore=IGNORE) if src.is_dir() else shutil.copy2(src, dest)


def clean_venv(path: Path) -> Path:
    """A venv with nothing but numpy and protobuf; returns its python."""
    venv.create(path, with_pip=False, system_site_packages=False, symlinks=os.name != "nt")
    site = _site_packages(path)
    np_top = Path(np.__file__).resolve().parent.parent
    pb_top = Path(google.protobuf.__file__).resolve().parent.parent.parent
    _install_copy(site, np_top, ["numpy", "numpy.libs", "numpy-*.dist-info"])
    _install_copy(site, pb_top, ["google/protobuf", "google/_upb", "protobuf-*.dist-info"])
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def deploy_folder(path: Path, package: Path) -> Path:
    """The generated package beside the runtime subpackages of mace, nothing else of the repo."""
    shutil.copytree(package, path / package.name, ignore=IGNORE)
    src = Path(mace.__file__).parent
    (path / "mace").mkdir()
    for name in RUNTIME:
        s = src / name
        shutil.copytree(s, path / "mace" / name, ignore=IGNORE) if s.is_dir() else shutil.copy2(s, path / "mace" / name)
    return path


def test_generated_package_runs_with_only_the_runtime(tmp_path):
    models = {**digits_models(), **squeezenet_models(tmp_path)}
    config, lib = convert(tmp_path / "conv", "both", models, graph="code", data="code")
    python = clean_venv(tmp_path / "venv")
    package = code_dir(lib, config.library_name)
    for model in models:
        engine = create_engine_from_package(package, model)
        inputs = inputs_for(engine)
        expected = engine.run(inputs)
        work = deploy_folder(tmp_path / f"deploy_{model}", package)
        np.savez(work / "inputs.npz", **inputs)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        r = subprocess.run([str(python), "-s", "-c", SCRIPT.format(package=package.name, model=model)],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert str(tmp_path / "venv") in r.stdout   # numpy came from the clean venv
        got = dict(np.load(work / "outputs.npz"))
        assert got.keys() == expected.keys()
        for name in expected:
            # the clean venv has no numba: its fast kernels take the numpy path (other float
            # rounding than the compiled loops this process may use); file vs code byte
            # identity is tested in one process in test_codegen
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-7)
