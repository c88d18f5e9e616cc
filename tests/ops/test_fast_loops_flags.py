"""A loop compiled without fastmath keeps its exact semantics whichever compiles first: numba
compiles a loop that a parallel driver calls with the driver's flags and caches that code as the
loop's own, so a fastmath driver compiled first (in one process) changed the loop's results in
every later process: binary_clip's MIN(NaN, x) gave x. fake_quantize (x / scale must stay a
division, as onnxruntime's) has a driver of the same kind and is held to its bytes too. Each
case runs in fresh processes on an empty numba cache: the driver first, then the loop alone,
loaded from that cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mace.ops.fast._jit import loops

pytestmark = pytest.mark.skipif(loops() is None, reason="numba is not installed here: no compiled loops")

CASE = r'''
import json, sys
import numpy as np
from mace.ops.fast._jit import loops
L = loops()
which, name = sys.argv[1], sys.argv[2]
f32 = np.float32
if name == "binary_clip":
    a = np.array([np.nan, 1, 2, np.nan, -0.0, np.inf] * 6, f32)
    b = np.array([0.5, np.nan, 1, 3, np.nan, np.nan] * 6, f32)
    out = np.zeros_like(a)
    for code in (0, 3, 4):
        if which == "par":
            L.binary_clip_par(a, b, code, f32(-np.inf), f32(np.inf), out, 2)
        else:
            L.binary_clip(a, b, code, f32(-np.inf), f32(np.inf), out, 0, a.size)
            print(json.dumps(out.tobytes().hex()))
else:
    x = np.linspace(-3, 3, 97).astype(f32)
    out = np.zeros_like(x)
    scale = f32(0.1)   # 1 / 0.1 is inexact: x * (1 / scale) rounds differently from x / scale
    if which == "par":
        L.fake_quantize_par(x, scale, f32(0), f32(-128), f32(127), out, 2)
    else:
        L.fake_quantize(x, scale, f32(0), f32(-128), f32(127), out, 0, x.size)
        print(json.dumps(out.tobytes().hex()))
'''


def _want(name: str) -> list:
    f32 = np.float32
    if name == "binary_clip":
        a = np.array([np.nan, 1, 2, np.nan, -0.0, np.inf] * 6, f32)
        b = np.array([0.5, np.nan, 1, 3, np.nan, np.nan] * 6, f32)
        return [(a + b).tobytes().hex(), np.minimum(a, b).tobytes().hex(), np.maximum(a, b).tobytes().hex()]
    x = np.linspace(-3, 3, 97).astype(f32)
    scale = f32(0.1)
    return [((np.clip(np.rint(x / scale), -128, 127)) * scale).astype(f32).tobytes().hex()]


@pytest.mark.parametrize("name", ["binary_clip", "fake_quantize"])
def test_a_loop_compiled_first_by_its_parallel_driver_keeps_its_semantics(name, tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    for which in ("par", "serial"):
        r = subprocess.run([sys.executable, "-c", CASE, which, name], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    got = [json.loads(line) for line in r.stdout.splitlines() if line.startswith('"')]
    assert got == _want(name)
