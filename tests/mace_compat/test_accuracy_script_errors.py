"""The user's accuracy script failing or returning nonsense (issue 38): each is the user's error,
reported through the CLI as one `error:` naming the file and the method, with the script's own
traceback where it raised, exit 1; never an internal error (exit 3), a hang, or exit 0 without
a result."""
from __future__ import annotations

import os
import textwrap
import time

import pytest

from tests.cli_helpers import cli, digits_model, workdir, write_deployment

METHODS = {
    "init": "def __init__(self, **kwargs):\n    self.n = 0",
    "sample_size": "def sample_size(self):\n    return 3",
    "batch_size": "def batch_size(self):\n    return 1",
    "preprocess": "def preprocess(self, start, end, **kwargs):\n    return {'image': np.zeros((end - start, 8, 8, 1), np.float32)}",
    "postprocess": "def postprocess(self, start, end, output_map, **kwargs):\n    self.n += end - start",
    "result": "def result(self):\n    return {'samples': self.n}",
}


def script_text(top: str = "", **methods) -> str:
    body = "\n".join(textwrap.indent(methods.get(k, v), "    ") for k, v in METHODS.items())
    body = body.replace("def init(", "def __init__(")
    return f"import sys\nfrom os import _exit as hard_exit\nimport numpy as np\n{top}\n\nclass AccuracyValidator(object):\n{body}\n"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = workdir(tmp_path_factory.mktemp("accuracy_errors"))
    write_deployment(work / "acc.yml", {"digits_cnn": digits_model(accuracy_validation_script="acc.py")})
    r = cli("convert", "--config=acc.yml", cwd=work)
    assert r.returncode == 0, r.stderr
    return work


def run_script(work, text: str, *flags, env=None, timeout=120):
    (work / "acc.py").write_text(text)
    (work / "builds" / "digits" / "digits_cnn_accuracy.json").unlink(missing_ok=True)
    return cli("run", "--config=acc.yml", *flags, cwd=work, env=env, timeout=timeout)


def refused(r, *needles):
    assert r.returncode == 1, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "internal error" not in r.stderr, r.stderr
    assert len([x for x in r.stderr.splitlines() if x.startswith("error:")]) == 1, r.stderr
    for n in needles:
        assert n in r.stderr, f"{n!r} not in:\n{r.stderr}"
    return r.stderr


def test_the_template_script_runs(work):
    r = run_script(work, script_text())
    assert r.returncode == 0, r.stderr
    assert (work / "builds" / "digits" / "digits_cnn_accuracy.json").is_file()


@pytest.mark.parametrize("method, code, needles", [
    ("preprocess", "def preprocess(self, start, end, **kwargs):\n    return {}['post']",
     ["AccuracyValidator.preprocess(0, 1) raised KeyError: 'post'", "acc.py\", line", "return {}['post']"]),
    ("postprocess", "def postprocess(self, start, end, output_map, **kwargs):\n    raise ValueError('bad label')",
     ["AccuracyValidator.postprocess(0, 1, ", "raised ValueError: bad label", "raise ValueError('bad label')"]),
    ("result", "def result(self):\n    return 1 / 0",
     ["AccuracyValidator.result() raised ZeroDivisionError", "return 1 / 0"]),
    ("init", "def __init__(self, **kwargs):\n    open('/nonexistent/labels.txt')",
     ["AccuracyValidator() failed: FileNotFoundError", "labels.txt"]),
    ("result", "def result(self):\n    sys.exit(3)", ["AccuracyValidator.result() called sys.exit(3)"]),
    ("preprocess", "def preprocess(self, start, end, **kwargs):\n    sys.exit(0)",
     ["AccuracyValidator.preprocess(0, 1) called sys.exit(0)"]),
    # os._exit ended the CLI at once with the script's code (0: a run without a result)
    ("result", "def result(self):\n    import os\n    os._exit(0)", ["AccuracyValidator.result() called os._exit(0)"]),
    ("postprocess", "def postprocess(self, start, end, output_map, **kwargs):\n    import posix\n    posix._exit(3)",
     ["AccuracyValidator.postprocess(0, 1, ", "called os._exit(3)", "posix._exit(3)"]),
    ("init", "def __init__(self, **kwargs):\n    hard_exit(0)", ["AccuracyValidator() failed: called os._exit(0)"]),
])
def test_the_scripts_exceptions_and_exits_are_its_errors(work, method, code, needles):
    err = refused(run_script(work, script_text(**{method: code})), "acc.yml: models.digits_cnn", "acc.py",
                  *needles)
    assert "Traceback (most recent call last)" in err and "mace/validate" not in err   # theirs, not ours
    assert not (work / "builds" / "digits" / "digits_cnn_accuracy.json").exists()


@pytest.mark.parametrize("top, needles", [
    ("raise ImportError('no module named cv3')", ["acc.py failed to load: ImportError", "cv3"]),
    ("sys.exit(0)", ["acc.py failed to load: called sys.exit(0)"]),
    ("import os\nos._exit(0)", ["acc.py failed to load: called os._exit(0)"]),
])
def test_a_script_failing_at_import(work, top, needles):
    refused(run_script(work, script_text(top)), *needles)


@pytest.mark.parametrize("returned, needles", [
    ("None", ["sample_size() returned None (NoneType), not a whole number"]),
    ("float('nan')", ["sample_size() returned nan (float), not a whole number"]),
    ("float('inf')", ["returned inf (float), not a whole number"]),
    ("'x'", ["returned 'x' (str), not a whole number"]),
    ("2.5", ["returned 2.5 (float)"]),
    ("10 ** 5000", ["returned an int of about 5001 digits: expected 1 to"]),
    ("10 ** 12", ["1000000000000 batches, more than 1000000", "MACE_ACCURACY_MAX_BATCHES"]),
    ("0", ["sample_size() returned 0: no sample to evaluate"]),
    ("-5", ["sample_size() returned -5: no sample to evaluate"]),
])
def test_nonsense_sample_sizes_are_refused(work, returned, needles):
    start = time.monotonic()
    refused(run_script(work, script_text(sample_size=f"def sample_size(self):\n    return {returned}")),
            "acc.py", *needles)
    assert time.monotonic() - start < 60   # 10**12 batches are never listed


@pytest.mark.parametrize("value, needles", [
    ("'abc'", ["input 'image' holds strings, not numbers"]),
    ("[[1.0, 2.0], [3.0]]", ["input 'image' is no array of numbers"]),
    ("(x for x in range(64))", ["input 'image' holds Python objects"]),
    ("__import__('pathlib').Path('data.bin')", ["input 'image' holds Python objects"]),
    ("np.zeros((1, 8, 8, 1), np.complex64) + 1j", ["input 'image' holds complex numbers"]),
    ("np.zeros((0, 8, 8, 1), np.float32)", ["input 'image' has 0 sample(s) for the 1 asked",
                                            "would count as zeros"]),
])
def test_nonsense_from_preprocess_is_refused(work, value, needles):
    refused(run_script(work, script_text(preprocess=f"def preprocess(self, start, end, **kwargs):\n"
                                                    f"    return {{'image': {value}}}")),
            "acc.py", "AccuracyValidator.preprocess(0, 1)", *needles)


def test_a_result_of_5000_digits_is_saved_not_a_crash(work):
    r = run_script(work, script_text(result="def result(self):\n    return 10 ** 5000"))
    assert r.returncode == 0, r.stderr
    assert "an int of about 5001 digits" in (work / "builds/digits/digits_cnn_accuracy.json").read_text()


def test_a_hanging_call_meets_its_timeout(work):
    env = dict(os.environ, MACE_ACCURACY_CALL_TIMEOUT_S="1.5")
    start = time.monotonic()
    text = script_text(postprocess="def postprocess(self, start, end, output_map, **kwargs):\n"
                                   "    while True:\n        pass")
    refused(run_script(work, text, env=env, timeout=60),
            "AccuracyValidator.postprocess(0, 1, ", "did not return within 1.5 s", "MACE_ACCURACY_CALL_TIMEOUT_S")
    assert time.monotonic() - start < 30
    refused(run_script(work, script_text(), env=dict(os.environ, MACE_ACCURACY_CALL_TIMEOUT_S="nan")),
            "MACE_ACCURACY_CALL_TIMEOUT_S='nan': expected a positive number")


def test_a_script_that_is_no_python_file_and_empty_accuracy_runtimes(work):
    (work / "acc.txt").write_text(script_text())
    write_deployment(work / "txt.yml", {"digits_cnn": digits_model(accuracy_validation_script="acc.txt")})
    refused(cli("run", "--config=txt.yml", cwd=work), "acc.txt is not a Python file (.py)")
    r = run_script(work, script_text(), "--accuracy_runtimes=")
    refused(r, "--accuracy_runtimes '': pick from")
