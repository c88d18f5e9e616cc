"""The BLAS kernel choice made before numpy loads (mace/_blas.py)."""
import os
import subprocess
import sys

from mace._blas import NEEDED_FLAGS, cpu_flags


def _kernel_in_fresh_process(env_extra):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env.update(env_extra)
    code = "import mace, os; from mace._blas import blas_report; " \
           "print(os.environ.get('OPENBLAS_CORETYPE'), blas_report()[0][1])"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.split()


def test_avx512_kernels_chosen_only_when_the_cpu_has_them():
    coretype, arch = _kernel_in_fresh_process({})
    if NEEDED_FLAGS <= cpu_flags():
        assert coretype == "SkylakeX" and arch.lower() == "skylakex"
    else:
        print("CPU lacks AVX-512: OpenBLAS keeps its own choice", arch)
        assert coretype == "None"


def test_a_users_choice_wins():
    coretype, arch = _kernel_in_fresh_process({"OPENBLAS_CORETYPE": "Haswell"})
    assert coretype == "Haswell" and arch.lower() == "haswell"
