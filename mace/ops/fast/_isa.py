"""The instruction-set features the compiled loops are built for, as numba builds them: the
host CPU's, or those named in NUMBA_CPU_FEATURES (numba's own setting for building for
another CPU, e.g. NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=+avx2,+fma for a portable cache).
The loops pick 512-bit tiles and x86 intrinsics (vpdpbusd, vpmaddwd, the packs) from these;
every intrinsic has a plain LLVM IR form for a target without it, so no build emits an
instruction its target lacks (LLVM would abort the process). NUMBA_CPU_NAME alone changes only
the CPU model: numba still passes the host's feature list (+avx512f ... on an AVX-512 host), and
so does this module, so the loops keep their 512-bit tiles; setup/second_cpu_pass.py sets both."""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def cpu_features() -> str:
    """LLVM's feature string, e.g. '+avx2,+avx512f,-avx512vnni,...'; '' where unknown."""
    from numba.core import config   # numba's reading of NUMBA_CPU_FEATURES, as its codegen uses it
    if config.CPU_FEATURES is not None:
        return str(config.CPU_FEATURES)
    import llvmlite.binding as llvm
    try:
        return str(llvm.get_host_cpu_features().flatten())
    except RuntimeError:   # LLVM cannot tell on this host
        return ""


def has(feature: str) -> bool:
    """has('avx512vnni'): the feature is switched on ('+avx512vnni') for the target."""
    return f"+{feature}" in cpu_features().split(",")
