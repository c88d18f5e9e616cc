"""Suite-wide test setup: which OpenCL platform the GPU tests use, and its kernel cache.

- Debian's PoCL (pocl-opencl-icd, which setup/test.sh installs for CPUs the pip PoCL's LLVM 14
  cannot build for) links the shared libLLVM; in a process that has imported TensorFlow (whose
  own LLVM exports the same symbols) its kernel builds segfault. pytest-xdist workers run
  TensorFlow tests and GPU tests in one process, so where the pip PoCL (pocl-binary-distribution,
  self-contained) builds kernels on this CPU, the system's OpenCL platforms are hidden
  (OCL_ICD_VENDORS pointing to an empty folder) and every test process uses the pip one.
- PoCL also crashes when several processes build into one kernel cache at once (pocl/pocl#1480),
  so every worker gets its own PoCL cache folder.
Both are set in the controller before the workers start (they inherit them) and before anything
imports pyopencl; variables the user set are kept.
- Op attributes are strict here: a shape function or kernel reading an attribute its op spec
  does not declare (OpSpec.attrs) fails the test instead of silently reading a default.
- Small runs split too (MACE_SPLIT_SMALL_RUNS=1): an engine runs a model of under 4 M
  multiply-adds on one thread (mace/ops/fast/compute.py, for_run), and the suite's graphs are
  that small, so without it the compute pool's split paths would go untested. The tests of that
  choice itself (tests/runtime/test_small_runs.py) ask for it in their options.
- The kernels are numba's (MACE_AOT=0 whatever the user's shell says): a library served ahead of
  time (`warmup --aot`) would stand in for the numba dispatchers many tests inspect;
  tests/ops/test_aot.py sets MACE_AOT=1 in the processes it starts.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_TMP = Path(tempfile.gettempdir())
_PREFIX = str(_TMP / f"pymace-pocl-cache-{getattr(os, 'getuid', lambda: 0)()}-")
_PROBE = ("import pyopencl as cl\n"
          "ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])\n"
          "cl.Program(ctx, '__kernel void k(__global float *a) { a[0] = 1.0f; }').build()\n")


def _pip_pocl_builds(no_system_icds: Path) -> bool:
    env = {**os.environ, "OCL_ICD_VENDORS": str(no_system_icds)}
    try:
        return subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_configure(config):
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None and "OCL_ICD_VENDORS" not in os.environ:   # the controller (or a plain run)
        empty = _TMP / "pymace-no-system-opencl"
        empty.mkdir(exist_ok=True)
        if _pip_pocl_builds(empty):
            os.environ["OCL_ICD_VENDORS"] = str(empty)
    current = os.environ.get("POCL_CACHE_DIR")
    if current is None or current.startswith(_PREFIX):   # ours (inherited from the controller)
        os.environ["POCL_CACHE_DIR"] = _PREFIX + (worker or "main")

    os.environ.setdefault("MACE_SPLIT_SMALL_RUNS", "1")
    os.environ["MACE_AOT"] = "0"
    from mace.ops import registry
    registry.STRICT_ATTRS = True
