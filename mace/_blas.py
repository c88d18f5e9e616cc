"""Pick OpenBLAS's AVX-512 kernels on CPUs that have them but that OpenBLAS misdetects.

numpy's bundled OpenBLAS maps AMD Zen 4 (and some virtualised Intel CPUs) to
its Haswell (AVX2) kernels, which halves GEMM throughput, and GEMM is where a
numpy runtime spends its time. OpenBLAS reads OPENBLAS_CORETYPE once, when
numpy is first imported, so this runs from mace/__init__.py before that.
A user's own OPENBLAS_CORETYPE always wins; `blas_report()` says what is in use.
"""
from __future__ import annotations

import os
import sys

NEEDED_FLAGS = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}


def cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def prefer_avx512_kernels() -> bool:
    """Set OPENBLAS_CORETYPE=SkylakeX when safe and useful; True if it was set."""
    if "numpy" in sys.modules or "OPENBLAS_CORETYPE" in os.environ or not sys.platform.startswith("linux"):
        return False
    if not NEEDED_FLAGS <= cpu_flags():
        return False
    os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    return True


def blas_report() -> list:
    """[(library, kernel architecture, threads)] of the BLAS libraries numpy uses."""
    import numpy  # noqa: F401 - loads the BLAS so threadpoolctl can see it
    from threadpoolctl import threadpool_info

    return [(i.get("internal_api"), i.get("architecture"), i.get("num_threads"))
            for i in threadpool_info() if i.get("user_api") == "blas"]
