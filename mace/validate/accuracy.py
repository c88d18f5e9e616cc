"""`accuracy_validation_script`: a dataset metric computed by the user's script, as in MACE.

The script is a Python file defining MACE's plugin class:

    class AccuracyValidator:
        def __init__(self, **kwargs): ...
        def sample_size(self): ...                       # samples in the set
        def batch_size(self): ...                        # samples per model run (the input's batch)
        def preprocess(self, start, end, **kwargs): ...  # -> {input name: batch array or list}
        def postprocess(self, start, end, outputs, **kwargs): ...  # outputs: {output name: array}
        def result(self): ...                            # prints (MACE) and/or returns the metric

The loop is cut into pieces a scheduler can hand out: `load_validator`, `batches` (the
[start, end) ranges), `feed` (preprocess -> engine inputs), `run_batch` (one range through
a run function and into postprocess) and `evaluate` (all ranges in order, with a progress
callback). The sharded runner (mace/scale, `--cluster ray`) runs `infer` for its ranges on
each worker, each with its own validator, and calls postprocess on the driver in sample order.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace.config.images import image_batch, is_image
from mace.errors import ConfigError, ModelError

CLASS_NAME = "AccuracyValidator"
METHODS = ("sample_size", "batch_size", "preprocess", "postprocess", "result")


@dataclass
class AccuracyResult:
    model: str
    script: str
    samples: int
    batch_size: int
    batches: int
    seconds: float
    result: object = None          # what result() returned (None: it only printed, as MACE's sample)
    printed: str = ""              # what result() printed
    padded: int = 0                # zero samples added to fill the last batch (outputs dropped)
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        value = self.result
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            value = repr(value)
        return {"model": self.model, "script": self.script, "samples": self.samples,
                "batch_size": self.batch_size, "batches": self.batches, "seconds": round(self.seconds, 3),
                "result": value, "printed": self.printed, "padded": self.padded, "notes": self.notes}


def load_validator(path, where: str, **kwargs):
    """Import the script and make its AccuracyValidator; errors name the file (`where`: the key)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{where}: script {path} not found")
    spec = importlib.util.spec_from_file_location(f"mace_accuracy_{abs(hash(str(path.resolve())))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's code: say where it broke, briefly
        raise ConfigError(f"{where}: {path} failed to load: {type(e).__name__}: {e}") from None
    cls = getattr(module, CLASS_NAME, None)
    if cls is None:
        raise ConfigError(f"{where}: {path} defines no class {CLASS_NAME} (MACE's accuracy plugin interface)")
    missing = [m for m in METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise ConfigError(f"{where}: {path}: {CLASS_NAME} lacks {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except Exception as e:
        raise ConfigError(f"{where}: {path}: {CLASS_NAME}() failed: {type(e).__name__}: {e}") from None


def batches(sample_size: int, batch_size: int) -> list:
    """[start, end) of every batch; the last one may be short. No sample is an error: an accuracy
    over nothing is no result (result() would report whatever its empty state holds)."""
    if sample_size < 1:
        raise ConfigError(f"{CLASS_NAME}.sample_size() returned {sample_size}: no sample to evaluate, so no "
                          f"accuracy (is its data set where the script looks?)")
    if batch_size < 1:
        raise ConfigError(f"{CLASS_NAME}.batch_size() returned {batch_size}; it must be at least 1")
    return [(s, min(s + batch_size, sample_size)) for s in range(0, sample_size, batch_size)]


def feed(validator, specs, start: int, end: int) -> tuple:
    """(inputs shaped as the model's, zero samples padded): preprocess's arrays or lists of
    samples (a one-item list unwrapped, as MACE does) reshaped to each input; a short last
    batch is filled with zero samples whose outputs `run_batch` drops."""
    raw = validator.preprocess(start, end)
    if not isinstance(raw, dict):
        raise ModelError(f"{CLASS_NAME}.preprocess({start}, {end}) returned {type(raw).__name__}, "
                         f"not a dict of input name -> data")
    inputs, pad = {}, 0
    for s in specs:
        if s.name not in raw:
            raise ModelError(f"{CLASS_NAME}.preprocess({start}, {end}) gave no data for input '{s.name}' "
                             f"(it gave: {', '.join(map(str, raw)) or 'nothing'})")
        value = raw[s.name]
        if s.image is not None and _image_paths(value):  # file names: decoded as image_preprocess says
            value = image_batch(list(value) if isinstance(value, (list, tuple)) else [value], s, s.image,
                                f"{CLASS_NAME}.preprocess({start}, {end})")
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        a = np.asarray(value, dtype=s.dtype)
        want = int(np.prod(s.shape))
        batch = s.shape[0] if s.shape else 1
        per_sample = want // batch if batch else want
        if a.size != want and per_sample and a.size % per_sample == 0 and a.size < want:
            pad = batch - a.size // per_sample   # a short last batch
            a = np.concatenate([a.reshape(-1), np.zeros(want - a.size, a.dtype)])
        if a.size != want:
            raise ModelError(f"{CLASS_NAME}.preprocess({start}, {end}): input '{s.name}' has {a.size} values, "
                             f"the model takes {list(s.shape)} ({want})")
        inputs[s.name] = a.reshape(s.shape)
    return inputs, pad


def _image_paths(value) -> bool:
    items = value if isinstance(value, (list, tuple)) else [value]
    return bool(items) and all(isinstance(v, (str, Path)) and is_image(v) for v in items)


def infer(validator, run, specs, start: int, end: int) -> tuple:
    """(outputs of [start, end) with the padding dropped, zero samples padded): preprocess and
    run (`run(inputs) -> outputs`), the half of a batch a worker does (mace/scale)."""
    inputs, pad = feed(validator, specs, start, end)
    outputs = run(inputs)
    keep = end - start
    return {k: (np.asarray(v)[:keep] if pad else np.asarray(v)) for k, v in outputs.items()}, pad


def run_batch(validator, run, specs, start: int, end: int) -> int:
    """Preprocess [start, end), run it, postprocess; returns the padding."""
    outputs, pad = infer(validator, run, specs, start, end)
    validator.postprocess(start, end, outputs)
    return pad


def evaluate(validator, run, specs, model: str = "", script: str = "", progress=None) -> AccuracyResult:
    """Every batch in order through `run`, then result(); `progress(done, total)` after each batch."""
    t0 = time.perf_counter()
    size = int(validator.sample_size())
    ranges = batches(size, int(validator.batch_size()))
    padded = 0
    for i, (start, end) in enumerate(ranges):
        padded += run_batch(validator, run, specs, start, end)
        if progress:
            progress(i + 1, len(ranges))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        value = validator.result()
    return AccuracyResult(model, script, size, int(validator.batch_size()), len(ranges),
                          time.perf_counter() - t0, value, printed.getvalue(), padded)
