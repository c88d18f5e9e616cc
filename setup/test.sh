#!/usr/bin/env bash
# Set up .venv with every extra and run the whole test suite (`.ci/run` runs exactly this), then
# the example builds and a sample of numeric tests again under a second CPU feature set
# (setup/second_cpu_pass.py says which and why). Extra arguments go to pytest and skip the second
# pass, e.g. `bash setup/test.sh tests/ops -x`. The exit status is non-zero if either pass fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# GPU tests run on PoCL (OpenCL on the CPU). The PoCL inside the pyopencl wheel (LLVM 14) cannot
# build kernels on CPUs newer than its LLVM (e.g. AMD Zen 5); Debian's PoCL can, so add it where apt
# works. Without a working OpenCL platform the GPU tests skip, saying why. Where the wheel's PoCL
# does build kernels, the tests hide the system platforms (tests/conftest.py): Debian's PoCL
# shares libLLVM and segfaults in a process that has imported TensorFlow.
if ! dpkg -s pocl-opencl-icd >/dev/null 2>&1 && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq pocl-opencl-icd) >/dev/null 2>&1 \
    || echo "warning: pocl-opencl-icd not installed" >&2
fi
python3 -m venv .venv
.venv/bin/pip install -q -e ".[test,dev,tf,tflite,gpu,ray]"
# The layer contracts (docs/architecture.md; pyproject.toml [tool.importlinter]): a package that
# imports upward or a cycle fails here, before the tests.
echo "checking the import layers (lint-imports)"
.venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache
status=0
.venv/bin/python -m pytest -n 2 --dist loadfile "$@" || status=$?
if [ $# -eq 0 ]; then
  # numpy, OpenBLAS, numba and TensorFlow's oneDNN pick their kernels for this CPU: a checksum of
  # float output or an exact comparison that holds only on its instruction set fails here first.
  .venv/bin/python setup/second_cpu_pass.py || status=$?
fi
exit "$status"
