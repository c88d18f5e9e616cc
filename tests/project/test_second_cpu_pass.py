"""setup/second_cpu_pass.py (run by setup/test.sh after the suite): the settings it derives from
the CPU, and the tests it names exist."""
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "setup" / "second_cpu_pass.py"


def _module():
    spec = importlib.util.spec_from_file_location("second_cpu_pass", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_avx512_cpu_gets_avx2_everywhere():
    m = _module()
    present = {"SSE42", "AVX2", "FMA3", "X86_V3", "X86_V4", "AVX512F", "AVX512_SKX", "AVX512_ICL"}
    dispatch = ["X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"]   # numpy 2.4's; SPR absent here
    env, why = m.second_environment(present, dispatch, "x86_64")
    assert env == {"TF_ENABLE_ONEDNN_OPTS": "1", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL",
                   "OPENBLAS_CORETYPE": "Haswell", "NUMBA_CPU_NAME": "haswell",
                   "NUMBA_CPU_FEATURES": "+avx2,+fma", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert len(why) == 5 and "AVX-512" in why[1]


def test_an_avx2_cpu_gets_avx_and_other_cpus_a_generic_build():
    m = _module()
    present = {"SSE42", "AVX", "AVX2", "FMA3", "X86_V3"}
    env, _ = m.second_environment(present, ["X86_V3", "X86_V4"], "x86_64")
    assert env["NPY_DISABLE_CPU_FEATURES"] == "X86_V3" and env["OPENBLAS_CORETYPE"] == "Sandybridge"
    assert (env["NUMBA_CPU_NAME"], env["NUMBA_CPU_FEATURES"], env["ONEDNN_MAX_CPU_ISA"]) == \
        ("sandybridge", "+avx", "AVX")
    env, _ = m.second_environment({"NEON", "ASIMD"}, ["ASIMDHP"], "aarch64")
    assert env == {"TF_ENABLE_ONEDNN_OPTS": "1", "NUMBA_CPU_NAME": "generic"}


def test_the_named_tests_exist_and_this_cpu_gets_settings_numpy_accepts():
    m = _module()
    missing = []
    for test in m.EXAMPLES + m.NUMERIC:   # a file, or a test function in one
        path, _, name = test.partition("::")
        if not (ROOT / path).is_file() or (name and f"def {name}(" not in (ROOT / path).read_text()):
            missing.append(test)
    assert not missing, f"setup/second_cpu_pass.py names tests that are gone: {missing}"
    shown = subprocess.run([sys.executable, str(SCRIPT), "--print"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "second pass:" in shown.stdout, shown.stdout + shown.stderr
    env, _ = m.second_environment(*m.numpy_features(), platform.machine())
    done = subprocess.run([sys.executable, "-c", "import numpy"], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr   # numpy refuses a feature it lacks
