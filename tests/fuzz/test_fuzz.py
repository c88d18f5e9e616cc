"""The short fuzz run in CI: every target gets hypothesis-chosen mutations of its seed and
must answer with acceptance or a MaceError (docs/reliability.md, "Fuzzing"). The long run:
`python tools/fuzz.py --minutes 30`."""
from __future__ import annotations

import random

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the test extra: pip install .[test]")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from tests.fuzz.targets import TARGETS, mutate, run_one, seed, signature  # noqa: E402

# (examples per target): the whole module stays under ~60 s on 2 cores
EXAMPLES = {"deployment": 60, "onnx": 25, "tensorflow": 15, "caffe": 25, "ir": 60, "npy": 80}
def short(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seed_is_accepted(name):
    """The unmutated seeds load: the targets reach past the first check."""
    if name == "tensorflow":
        pytest.importorskip("tensorflow", reason="the TensorFlow frontend needs tensorflow (extra tf)")
    err = run_one(name, seed(name))
    assert err is None, signature(err)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_mutations_get_a_clear_error_or_load(name):
    if name == "tensorflow":
        pytest.importorskip("tensorflow", reason="the TensorFlow frontend needs tensorflow (extra tf)")
    data = seed(name)

    @short(EXAMPLES[name])
    @given(rng_seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
    def check(rng_seed, rounds):
        mutated = mutate(data, random.Random(rng_seed), rounds)
        err = run_one(name, mutated)
        assert err is None, f"{signature(err)}: {err!r}"

    check()
