"""Suite-wide test setup.

PoCL (the OpenCL platform the GPU tests run on) crashes when several processes build kernels into
one kernel cache at once (pocl/pocl#1480, #430: a segfault inside clBuildProgram). pytest-xdist
runs two workers, each building GPU programs, so every worker gets its own PoCL cache folder,
set before collection imports pyopencl; the CLI processes a test starts inherit it. A
POCL_CACHE_DIR the user set is kept.
"""
import os
import tempfile

_PREFIX = os.path.join(tempfile.gettempdir(), f"pymace-pocl-cache-{getattr(os, 'getuid', lambda: 0)()}-")


def pytest_configure(config):
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    current = os.environ.get("POCL_CACHE_DIR")
    if current is None or current.startswith(_PREFIX):   # ours (inherited from the controller)
        os.environ["POCL_CACHE_DIR"] = _PREFIX + worker
