"""The int8 fast kernels built for a CPU without AVX-512 (an AVX2 Haswell), as numba builds
for another CPU (NUMBA_CPU_NAME / NUMBA_CPU_FEATURES): every x86 intrinsic the loops use
(vpdpbusd, vpmaddwd, the packs, vpermi2b, 32-byte blocks) must fall back to plain LLVM IR there -- LLVM aborts the
whole process on an intrinsic its target lacks -- and the bytes must stay the reference's.
Run in a child process with its own numba cache (Haswell code runs on any newer x86 host)."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from mace.ops.fast._isa import has
from mace.ops.fast.int8 import _qjit

ROOT = Path(__file__).resolve().parents[2]
AVX2 = "+avx2,+fma,+popcnt"

CHILD = r"""
import copy
import numpy as np
from mace.ops.fast.int8._qjit import qloops
from mace.quantize.calibrate import collect_ranges
from mace.runtime.engine import Engine
from mace.transform.passes.quantize import quantize_graph
from tests.ops.ir_graph import make_graph

lib = qloops()
print("target", lib.VNNI, lib.BW, lib.MR)
rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (1, 6, 7, 64)).astype(np.float32)
consts = {"w1": rng.uniform(-1, 1, (64, 64, 1, 1)).astype(np.float32),
          "w2": rng.uniform(-1, 1, (64, 1, 3, 3)).astype(np.float32)}
ops = [("Conv2D", ["x", "w1"], ["a"], {"padding": "SAME"}),              # the integer GEMM
       ("DepthwiseConv2d", ["a", "w2"], ["b"], {"padding": "SAME",     # 64 channels, a fused
        "activation": "HARDSWISH", "pre_activation_range": [-6.0, 6.0]}),  # table: lookup, no vpermi2b
       ("Eltwise", ["a", "b"], ["s"], {"type": "SUM"}),                 # add2
       ("Pooling", ["s"], ["y"], {"pooling_type": "MAX", "kernels": [2, 2], "strides": [2, 2]})]
graph = make_graph(x.shape, ops, consts)
ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
print("tags", sorted({n.tag for n in fast.nodes}))
fast.run({"x": x}), ref.run({"x": x})
same = [t for t in ref.buffers if ref.buffers[t].dtype == np.uint8
        and np.array_equal(fast.buffers[t], ref.buffers[t])]
print("same", len(same), "of", sum(ref.buffers[t].dtype == np.uint8 for t in ref.buffers))
"""


@pytest.mark.skipif(_qjit.qloops() is None, reason="no numba here: the int8 fast kernels are off")
def test_int8_fast_kernels_built_for_avx2(tmp_path):
    if platform.machine() not in ("x86_64", "AMD64") or not has("avx2"):
        pytest.skip("needs an x86-64 host with AVX2 to run Haswell code")
    env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES=AVX2,
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["target"] == "0 False 2"    # no VNNI, no AVX-512BW: the plain-IR forms, 2-row tiles
    assert lines["tags"] == "['int8:fast']"
    count, total = lines["same"].split(" of ")
    assert count == total and int(total) >= 5
