"""Run a validation reference framework in a child process, so that its crash cannot take ours down.

LiteRT segfaults inside the process that runs it on some hostile models (an int8 activation of
scale 0 reaches its quantize kernel: read_model refuses the cases we know of, at convert and
before validating, but a C++ framework's crashes are not ours to list), and onnxruntime is C++
too. `run --validate` therefore runs them in a child Python: one child per validation (the
stateful sequence of a streaming model in one child, one interpreter), never one per sample.
The inputs go to it as .npy files in a fresh temporary folder, with the tensor names in a JSON
job file (names are never file names), and the outputs come back the same way. A child killed
by a signal is one ModelError naming the framework, the signal and the model
(`LiteRT crashed (SIGSEGV) running m.tflite; our own run is unaffected`); the framework's own
Python exceptions are its refusal, as in process (mace/validate/reference.py).

Test hooks (tests/tflite/test_reference_isolation.py; nothing else sets them; read by the child,
mace/validate/reference_child.py):
MACE_TEST_REFERENCE_CRASH=SIGSEGV (a signal name) makes the child kill itself with that signal
just before the framework runs; MACE_TEST_UNCHECKED_REFERENCE=1 makes the child skip read_model's
activation quantization check, so that LiteRT gets a model that check refuses and crashes for real.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from mace.errors import ModelError

CRASH_ENV = "MACE_TEST_REFERENCE_CRASH"
UNCHECKED_ENV = "MACE_TEST_UNCHECKED_REFERENCE"
JOB, RESULT = "job.json", "result.json"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])   # the folder holding this mace package
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from mace.validate.reference_child import child_main; child_main(sys.argv[2])")


def run_isolated(framework: str, runner: str, model_path, sequence: list, output_names: list, **options) -> list:
    """[{name: value}] per step of `sequence` ([{input name: value}]) from `runner` ('litert',
    'onnxruntime') in a child process; `framework` names it in errors."""
    with tempfile.TemporaryDirectory(prefix="mace-reference-") as tmp:
        folder = Path(tmp)
        steps = []
        for k, inputs in enumerate(sequence):
            for i, value in enumerate(inputs.values()):
                np.save(folder / f"in{k}_{i}.npy", np.asarray(value), allow_pickle=False)
            steps.append(list(inputs))
        (folder / JOB).write_text(json.dumps({"runner": runner, "model": str(model_path), "steps": steps,
                                              "outputs": list(output_names), "options": options}))
        proc = subprocess.run([sys.executable, "-c", _BOOT, _PACKAGE_ROOT, str(folder)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            result = json.loads((folder / RESULT).read_text())
        except (OSError, ValueError):
            raise ModelError(_died(framework, model_path, proc)) from None
        if "error" in result:   # the framework's refusal (or our check of the model), as in process
            raise ModelError(result["error"])
        if "internal" in result:   # our bug in the child: an internal error, with its traceback
            raise RuntimeError(f"running {framework} in a child process failed:\n{result['internal']}")
        return [{name: np.load(folder / f"out{k}_{i}.npy", allow_pickle=False) for i, name in enumerate(names)}
                for k, names in enumerate(result["steps"])]


def _died(framework: str, model_path, proc) -> str:
    """Why the child gave no result: a signal (a crash in the framework's native code, or a kill)
    or an exit status, with the last line it wrote to stderr."""
    if proc.returncode < 0:
        try:
            how = f"crashed ({signal.Signals(-proc.returncode).name})"
        except ValueError:
            how = f"crashed (signal {-proc.returncode})"
    else:
        how = f"exited with status {proc.returncode} without a result"
    lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines()
             if ln.strip() and not ln.startswith("INFO:")]
    last = f" (its last message: {lines[-1][:300]})" if lines else ""
    return f"{framework} {how} running {model_path}; our own run is unaffected{last}"
