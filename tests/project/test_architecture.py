"""The layer order of docs/architecture.md holds, and imports inside functions stay the exception."""
import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Modules allowed to import mace modules inside functions, and why (start-up time or the device
# runner's numpy-free start); any other function-level import is hiding a cycle or is a leftover.
LAZY_OK = {
    "mace/devices/runner.py": "runs on boards: numpy loads after the thread flags are read",
    "mace/ops/fast/_jit.py": "numba is optional and slow to load: the compiled loops load on first use",
    "mace/ops/fast/int8/_qjit.py": "the same for the int8 kernels' compiled loops (_qloops)",
    "mace/cli/_quant_flags.py": "the converter (frontends) loads only for --trace_dir",
    "mace/scale/runner.py": "Ray (seconds to import, an optional extra) loads only for --cluster ray",
}


def test_import_contracts_hold():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (the dev extra): pip install -e .[dev]")
    done = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "BROKEN" not in done.stdout


def _function_level_mace_imports(path: Path) -> list:
    tree = ast.parse(path.read_text())
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mace"):
                    found.append(node.lineno)
                elif isinstance(node, ast.Import) and any(a.name.startswith("mace") for a in node.names):
                    found.append(node.lineno)
    return found


def test_function_level_imports_only_where_they_buy_something():
    offenders = {}
    for path in sorted((ROOT / "mace").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        lines = _function_level_mace_imports(path)
        if lines and rel not in LAZY_OK:
            offenders[rel] = lines
    assert not offenders, f"mace imports inside functions (move them to the top, or the helper down a layer): {offenders}"


def test_every_module_imports():
    """import-linter ignores an import of a module that does not exist (a path a move left
    behind); importing every module catches it."""
    import importlib
    import pkgutil

    import mace

    optional = ("tensorflow", "pyopencl", "tflite", "ai_edge_litert", "numba")
    failed = {}
    for info in pkgutil.walk_packages(mace.__path__, "mace."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as e:
            if not (e.name or "").startswith("mace") and (e.name or "").split(".")[0] in optional:
                continue   # an optional extra this install lacks
            failed[info.name] = repr(e)
        except Exception as e:   # noqa: BLE001 - any import-time error is the finding
            failed[info.name] = repr(e)
    assert not failed, failed
