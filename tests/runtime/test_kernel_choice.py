"""Which kernel takes each node, which ops quantize and which the GPU takes, on real graphs:
the same as the snapshot written before the kernel checks became one `check(ctx)`
(tests/runtime/kernel_choice_cases.py; `kernel_choice.json`)."""
import json

import pytest

from mace.ops.fast import _jit
from mace.ops.fast.int8._qjit import qloops
from tests.runtime.kernel_choice_cases import SNAPSHOT, snapshot


def test_kernel_choice_matches_the_snapshot(monkeypatch):
    if _jit.loops() is None or qloops() is None:
        pytest.skip("the snapshot was taken with numba's compiled loops (fast kernels decline without them)")
    monkeypatch.delenv("MACE_NO_JIT", raising=False)
    want, got = json.loads(SNAPSHOT.read_text()), snapshot()
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
