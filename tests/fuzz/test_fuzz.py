"""The short fuzz run in CI: every target gets hypothesis-chosen mutations of its seed and
must answer with acceptance or a MaceError (docs/reliability.md, "Fuzzing"). The long run:
`python tools/fuzz.py --minutes 30`."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the test extra: pip install .[test]")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from tests.fuzz.targets import TARGETS, mutate, run_one, seed, signature  # noqa: E402

# (examples per target): the whole module stays under ~90 s on 2 cores
EXAMPLES = {"deployment": 60, "onnx": 25, "tensorflow": 15, "caffe": 25, "ir": 60, "npy": 80,
            "tflite": 100, "png": 150, "jpeg": 150, "image_preprocess": 150, "ray_address": 150,
            "accuracy_script": 40, "manifest": 40, "shard": 60, "sweep": 40, "url": 60}
# what a target needs beyond the base install: (module, why)
NEEDS = {"tensorflow": ("tensorflow", "the TensorFlow frontend needs tensorflow (extra tf)"),
         "tflite": ("tflite", "the TFLite frontend needs the tflite package (extra tflite)"),
         "png": ("PIL", "images are decoded by Pillow (extra images)"),
         "jpeg": ("PIL", "images are decoded by Pillow (extra images)"),
         "image_preprocess": ("PIL", "images are decoded by Pillow (extra images)")}


def _skip_without_extra(name: str) -> None:
    if name in NEEDS:
        pytest.importorskip(NEEDS[name][0], reason=NEEDS[name][1])

def short(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seed_is_accepted(name):
    """The unmutated seeds load: the targets reach past the first check."""
    _skip_without_extra(name)
    err = run_one(name, seed(name))
    assert err is None, signature(err)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_mutations_get_a_clear_error_or_load(name):
    _skip_without_extra(name)
    data = seed(name)

    @short(EXAMPLES[name])
    @given(rng_seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
    def check(rng_seed, rounds):
        mutated = mutate(data, random.Random(rng_seed), rounds)
        err = run_one(name, mutated)
        assert err is None, f"{signature(err)}: {err!r}"

    check()


FINDINGS = sorted((Path(__file__).parent / "findings").iterdir())


@pytest.mark.parametrize("path", FINDINGS, ids=[p.name for p in FINDINGS])
def test_past_findings_of_the_long_run_stay_fixed(path):
    """Inputs the 30-minute run found (internal errors then), named by target-what: each is now
    accepted or a clear error."""
    name = path.name.split("-")[0]
    _skip_without_extra(name)
    err = run_one(name, path.read_bytes())
    assert err is None, f"{signature(err)}: {err!r}"
