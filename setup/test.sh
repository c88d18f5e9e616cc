#!/usr/bin/env bash
# Set up .venv with every extra and run the whole test suite (`.ci/run` runs exactly this), then
# the example builds and a sample of numeric tests again under a second CPU feature set
# (setup/second_cpu_pass.py says which and why). Extra arguments go to pytest and skip the second
# pass, e.g. `bash setup/test.sh tests/ops -x`. The exit status is non-zero if either pass fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# System packages the tests use (README, "Tests"), installed where apt-get runs as root, each
# printed as it happens; a test whose package is missing skips, saying why.
# - pocl-opencl-icd: GPU tests run on PoCL (OpenCL on the CPU). The PoCL inside the pyopencl wheel
#   (LLVM 14) cannot build kernels on CPUs newer than its LLVM (e.g. AMD Zen 5); Debian's can.
#   Where the wheel's PoCL does build kernels, the tests hide the system platforms
#   (tests/conftest.py): Debian's PoCL shares libLLVM and segfaults in a process that has
#   imported TensorFlow.
# - openssh-server: the device tests' board is a real sshd on 127.0.0.1 (docs/test_board.md).
# - chromium: the HTML reports and the sweep page are rendered and measured headless.
# - qemu-user-static: the ARM test boards (tests/devices/arm_board.py) are Debian's aarch64 and
#   armhf python3 with numpy run by qemu-aarch64-static / qemu-arm-static; their packages (26 MB for
#   aarch64, 15 MB for armhf) are downloaded once per machine into ~/.cache/mace-test-boards (docs/test_board.md).
# - python3-dev: Python's C headers, where the interpreter came without them (Debian's python3):
#   numba's ahead-of-time compiler builds `warmup --aot`'s kernel library against them
#   (tests/ops/test_aot.py).
missing=()
python3 -c "import os, sysconfig; assert os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" \
  2>/dev/null || missing+=(python3-dev)
dpkg -s pocl-opencl-icd >/dev/null 2>&1 || missing+=(pocl-opencl-icd)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing system packages for the tests: ${missing[*]}"
    apt-get update -q || true
    for package in "${missing[@]}"; do
      echo "apt-get install $package"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=120 "$package" \
        || echo "warning: $package not installed: the tests that need it skip" >&2
    done
  else
    echo "note: not installed: ${missing[*]} (apt-get as root would add them): the tests that need them skip" >&2
  fi
fi
python3 -m venv .venv
.venv/bin/pip install -q -e ".[test,dev,tf,tflite,gpu,ray]"
# tf_keras (the keras2 extra, Keras 2 .h5 files) for the installed TensorFlow, without the full
# `tensorflow` wheel its requirement would pull in beside tensorflow-cpu (same modules, ~2x the size)
tf_minor=$(.venv/bin/python -c "from importlib.metadata import version; print('.'.join(version('tensorflow-cpu').split('.')[:2]))")
.venv/bin/pip install -q --no-deps "tf-keras==${tf_minor}.*"
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
