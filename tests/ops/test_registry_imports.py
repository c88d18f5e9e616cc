"""Every op module imports first, on its own: kernels register with their op type's spec
whenever both have loaded (mace/ops/registry.py), so importing a kernel module before
anything else (a fast kernel that subclasses a reference one, say) must not import it back
half-initialised. Each module in a clean import state of one child process."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import importlib, pkgutil, sys
from pathlib import Path
names = [i.name for i in pkgutil.walk_packages([str(Path("mace/ops"))], "mace.ops.")
         if not i.name.rsplit(".", 1)[-1].startswith("_")]
failed = []
for name in names:
    for k in [k for k in sys.modules if k == "mace" or k.startswith("mace.")]:
        del sys.modules[k]
    try:
        importlib.import_module(name)
        from mace.ops.registry import spec
        spec("Conv2D")   # every module loaded and registered after it
    except Exception as e:
        failed.append(f"{name}: {type(e).__name__}: {e}")
print(len(names), "modules")
print("\n".join(failed))
"""


def test_every_op_module_imports_first():
    run = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    count, *failed = run.stdout.strip().splitlines()
    assert int(count.split()[0]) > 100 and not failed, "\n".join(failed)
