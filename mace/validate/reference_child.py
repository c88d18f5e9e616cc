"""The child process of mace/validate/isolated.py: runs one reference job and writes its result.

Started as `python -c ...` with the job folder; it reads job.json and in<k>_<i>.npy, runs the
framework in this process (mace/validate/reference.py, *_here), and writes result.json
(outputs as out<k>_<i>.npy, or the framework's refusal, or our traceback).
"""
from __future__ import annotations

import json
import os
import signal
import traceback
from pathlib import Path

import numpy as np

from mace.errors import MaceError
from mace.frontends.tflite import model_file
from mace.validate import reference
from mace.validate.isolated import CRASH_ENV, JOB, RESULT, UNCHECKED_ENV


def child_main(folder: str) -> None:
    """The child's side: run the job in `folder`, write result.json (and out<k>_<i>.npy)."""
    folder = Path(folder)
    job = json.loads((folder / JOB).read_text())
    try:
        sequence = [{name: np.load(folder / f"in{k}_{i}.npy", allow_pickle=False) for i, name in enumerate(names)}
                    for k, names in enumerate(job["steps"])]
        outputs = _run(job, sequence)
    except MaceError as e:
        _write(folder, {"error": str(e)})
        return
    except BaseException:  # noqa: BLE001 - reported to the parent as what it is: our bug
        _write(folder, {"internal": traceback.format_exc()})
        return
    steps = []
    for k, result in enumerate(outputs):
        for i, value in enumerate(result.values()):
            np.save(folder / f"out{k}_{i}.npy", np.asarray(value), allow_pickle=False)
        steps.append(list(result))
    _write(folder, {"steps": steps})


def _run(job: dict, sequence: list) -> list:
    if os.environ.get(UNCHECKED_ENV) == "1":   # tests only: let LiteRT meet what read_model refuses
        model_file._check_activation_quantization = lambda path, t: None
    crash = os.environ.get(CRASH_ENV)
    if crash:   # tests only: die as a native crash would, just before the framework runs
        os.kill(os.getpid(), getattr(signal, crash))
    model, names, options = Path(job["model"]), job["outputs"], job["options"]
    if job["runner"] == "litert":
        return reference.litert_sequence_here(model, sequence, names, **options)
    if job["runner"] == "onnxruntime":
        return [reference.onnxruntime_here(model, inputs, names, **options) for inputs in sequence]
    raise ValueError(f"no reference runner {job['runner']!r}")


def _write(folder: Path, doc: dict) -> None:
    tmp = folder / (RESULT + ".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, folder / RESULT)
