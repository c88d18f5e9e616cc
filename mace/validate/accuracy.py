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
import operator
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace.config.images import image_batch, is_image
from mace.errors import ConfigError, MaceError
from mace.util.env_limits import positive_env

CLASS_NAME = "AccuracyValidator"
METHODS = ("sample_size", "batch_size", "preprocess", "postprocess", "result")
TIMEOUT_ENV, TIMEOUT_S = "MACE_ACCURACY_CALL_TIMEOUT_S", 600.0   # one call of the script's methods
BATCHES_ENV, MAX_BATCHES = "MACE_ACCURACY_MAX_BATCHES", 1_000_000  # every range is listed (and fingerprinted) up front


class ScriptError(MaceError):
    """The user's accuracy script raised, exited, hung or returned nonsense: the message names the
    method and holds the script's own traceback (it is the user's code, not ours)."""


class _CallTimeout(BaseException):
    """Raised inside the script by SIGALRM: a BaseException, so the script's `except Exception`
    does not swallow it."""


class _HardExit(BaseException):
    """os._exit(code) called by the script: raised in its place (see _no_hard_exit)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


_REAL_EXIT = os._exit
_NATIVE_OS = sys.modules[os.name]   # posix (or nt): its _exit is os._exit
_script_threads: list = []   # the threads now inside the script's code (nested: listed again)


def _exit_from_script(code=0):
    """os._exit while the script runs: in the thread running it, a _HardExit the caller reports;
    anywhere else (Ray's own threads, a reference the script kept for later) the real one."""
    if threading.get_ident() in _script_threads:
        raise _HardExit(code)
    _REAL_EXIT(code)


@contextlib.contextmanager
def _no_hard_exit():
    """os._exit ends the process at once, no handler, no `finally`: a script calling it took the
    CLI down with its code (exit 0 without a result). While the script runs, os._exit (and
    posix._exit, the same function) raise instead; a script that keeps `from os import _exit`
    keeps this wrapper, which raises only inside the script's calls."""
    _script_threads.append(threading.get_ident())
    os._exit = _NATIVE_OS._exit = _exit_from_script
    try:
        yield
    finally:
        _script_threads.remove(threading.get_ident())
        if not _script_threads:
            os._exit = _NATIVE_OS._exit = _REAL_EXIT


@contextlib.contextmanager
def _script_running(seconds: float):
    """The script's code runs inside this: bounded in time, and unable to os._exit."""
    with _no_hard_exit(), _time_limit(seconds):
        yield


def _exit_said(e: BaseException) -> str:
    return f"called os._exit({shown(e.code)})" if isinstance(e, _HardExit) else f"called sys.exit({shown(e.code)})"


def _positive_env(env: str, default: float, kind=float):
    try:
        return positive_env(env, default, kind)
    except ValueError as e:
        raise ConfigError(str(e)) from None


@contextlib.contextmanager
def _time_limit(seconds: float):
    """SIGALRM after `seconds` in the main thread (the CLI and Ray's workers run the script there);
    elsewhere no limit, as a thread cannot be interrupted. A timer set by the caller is restored."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise _CallTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def shown(value, limit: int = 200) -> str:
    """repr() for messages and tables, bounded (a 5,000-digit int has no str() at all)."""
    try:
        text = repr(value)
    except ValueError:   # int too large to convert to a string
        text = f"an int of about {int(abs(value).bit_length() * 0.30103) + 1} digits"
    except Exception as e:  # a user object whose __repr__ fails
        text = f"<{type(value).__name__}: repr failed: {type(e).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def _said(e: BaseException, limit: int = 500) -> str:
    """str() of the script's exception, bounded; its repr when str() itself fails."""
    try:
        text = str(e)
    except Exception:
        return shown(e, limit)
    return text if len(text) <= limit else text[:limit] + "..."


class Script:
    """The user's AccuracyValidator, every call bounded in time and its failures made ScriptErrors
    naming the file, the method and the script's own traceback."""

    def __init__(self, validator, where: str = "", path=None):
        self.validator, self.where, self.path = validator, where, path
        self.seconds = _positive_env(TIMEOUT_ENV, TIMEOUT_S)   # read once, for every call

    def _name(self, method: str, args: tuple) -> str:
        head = f"{self.where}: " if self.where else ""
        return f"{head}{CLASS_NAME}.{method}({', '.join(map(str, args))})"

    def call(self, method: str, *args):
        seconds = self.seconds
        try:
            with _script_running(seconds):
                return getattr(self.validator, method)(*args)
        except _CallTimeout:
            raise ScriptError(f"{self._name(method, args)} did not return within {seconds:g} s "
                              f"(set {TIMEOUT_ENV} to allow more)") from None
        except (SystemExit, _HardExit) as e:
            raise ScriptError(f"{self._name(method, args)} {_exit_said(e)}: the "
                              f"script must return, not exit\n{_their_traceback(e)}") from None
        except Exception as e:
            raise ScriptError(f"{self._name(method, args)} raised {type(e).__name__}: {_said(e)}\n"
                              f"{_their_traceback(e)}") from None

    def count(self, method: str, largest: int) -> int:
        """sample_size() or batch_size(): a whole number from 1 to `largest`."""
        value = self.call(method)
        try:
            if isinstance(value, (bool, np.bool_)):
                raise TypeError
            number = operator.index(value)   # int and numpy integers; not 2.5, nan, '5' or None
        except TypeError:
            raise ScriptError(f"{self._name(method, ())} returned {shown(value)} "
                              f"({type(value).__name__}), not a whole number") from None
        if number < 1 or number > largest:
            what = "no sample to evaluate, so no accuracy (is its data set where the script looks?)" \
                if method == "sample_size" and number < 1 else f"expected 1 to {largest}"
            raise ScriptError(f"{self._name(method, ())} returned {shown(number)}: {what}")
        return number

    def sample_size(self):
        return self.count("sample_size", MAX_SAMPLES)

    def batch_size(self):
        return self.count("batch_size", MAX_SAMPLES)

    def preprocess(self, start, end):
        return self.call("preprocess", start, end)

    def postprocess(self, start, end, outputs):
        return self.call("postprocess", start, end, outputs)

    def result(self):
        return self.call("result")


MAX_SAMPLES = 1 << 62   # what numpy indexes; the number of batches is the real bound (MAX_BATCHES)


def as_script(validator) -> Script:
    return validator if isinstance(validator, Script) else Script(validator)


def _their_traceback(e: BaseException) -> str:
    """The traceback from the script's frames on (ours, the caller, left out), indented."""
    tb = e.__traceback__.tb_next if e.__traceback__ else None
    if isinstance(e, _HardExit):   # its last frame is _exit_from_script: ours
        lines = ["Traceback (most recent call last):\n", *traceback.format_list(traceback.extract_tb(tb)[:-1]),
                 f"os._exit({shown(e.code)})\n"]
    else:
        lines = traceback.format_exception(type(e), e, tb)
    return "".join("  " + line for text in lines for line in text.splitlines(keepends=True)).rstrip()


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
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):   # objects, nan, a 5,000-digit int
            value = shown(value, 1000)
        return {"model": self.model, "script": self.script, "samples": self.samples,
                "batch_size": self.batch_size, "batches": self.batches, "seconds": round(self.seconds, 3),
                "result": value, "printed": self.printed, "padded": self.padded, "notes": self.notes}


def load_validator(path, where: str, **kwargs):
    """Import the script and make its AccuracyValidator; errors name the file (`where`: the key)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{where}: script {path} not found" if not path.exists()
                          else f"{where}: script {path} is not a regular file")
    if path.suffix != ".py":
        raise ConfigError(f"{where}: script {path} is not a Python file (.py)")
    seconds = _positive_env(TIMEOUT_ENV, TIMEOUT_S)
    spec = importlib.util.spec_from_file_location(f"mace_accuracy_{abs(hash(str(path.resolve())))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        with _script_running(seconds):
            spec.loader.exec_module(module)
    except _CallTimeout:
        raise ScriptError(f"{where}: {path} did not finish loading within {seconds:g} s "
                          f"(set {TIMEOUT_ENV} to allow more)") from None
    except (Exception, SystemExit, _HardExit) as e:  # the user's code: say where it broke, with their traceback
        what = _exit_said(e) if isinstance(e, (SystemExit, _HardExit)) else f"{type(e).__name__}: {_said(e)}"
        raise ScriptError(f"{where}: {path} failed to load: {what}\n{_their_traceback(e)}") from None
    cls = getattr(module, CLASS_NAME, None)
    if cls is None:
        raise ConfigError(f"{where}: {path} defines no class {CLASS_NAME} (MACE's accuracy plugin interface)")
    missing = [m for m in METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise ConfigError(f"{where}: {path}: {CLASS_NAME} lacks {', '.join(missing)}")
    try:
        with _script_running(seconds):
            validator = cls(**kwargs)
    except _CallTimeout:
        raise ScriptError(f"{where}: {path}: {CLASS_NAME}() did not return within {seconds:g} s "
                          f"(set {TIMEOUT_ENV} to allow more)") from None
    except (Exception, SystemExit, _HardExit) as e:
        what = _exit_said(e) if isinstance(e, (SystemExit, _HardExit)) else f"{type(e).__name__}: {_said(e)}"
        raise ScriptError(f"{where}: {path}: {CLASS_NAME}() failed: {what}\n{_their_traceback(e)}") from None
    return Script(validator, f"{where}: {path}", path)


def batches(sample_size: int, batch_size: int, where: str = "") -> list:
    """[start, end) of every batch; the last one may be short. No sample is an error: an accuracy
    over nothing is no result (result() would report whatever its empty state holds). Every
    range is listed up front (shards, their fingerprint), so at most MAX_BATCHES of them."""
    if sample_size < 1:
        raise ConfigError(f"{CLASS_NAME}.sample_size() returned {sample_size}: no sample to evaluate, so no "
                          f"accuracy (is its data set where the script looks?)")
    if batch_size < 1:
        raise ConfigError(f"{CLASS_NAME}.batch_size() returned {batch_size}; it must be at least 1")
    limit = int(_positive_env(BATCHES_ENV, MAX_BATCHES, int))
    count = -(-sample_size // batch_size)
    if count > limit:
        raise ScriptError(f"{where + ': ' if where else ''}{CLASS_NAME}.sample_size() {shown(sample_size)} in batches of {batch_size} is "
                          f"{shown(count)} batches, more than {limit} (a larger batch_size(), or set "
                          f"{BATCHES_ENV} to allow more)")
    return [(s, min(s + batch_size, sample_size)) for s in range(0, sample_size, batch_size)]


def feed(validator, specs, start: int, end: int) -> tuple:
    """(inputs shaped as the model's, zero samples padded): preprocess's arrays or lists of
    samples (a one-item list unwrapped, as MACE does) reshaped to each input; a short last
    batch is filled with zero samples whose outputs `run_batch` drops."""
    user = as_script(validator)
    raw = user.preprocess(start, end)
    name = user._name("preprocess", (start, end))
    if not isinstance(raw, dict):
        raise ScriptError(f"{name} returned {type(raw).__name__}, not a dict of input name -> data")
    inputs, pad = {}, 0
    for s in specs:
        if s.name not in raw:
            raise ScriptError(f"{name} gave no data for input '{s.name}' "
                              f"(it gave: {shown(', '.join(map(str, raw))) or 'nothing'})")
        value = raw[s.name]
        if s.image is not None and _image_paths(value):  # file names: decoded as image_preprocess says
            value = image_batch(list(value) if isinstance(value, (list, tuple)) else [value], s, s.image, name)
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        a = _numbers(value, name, s)
        shape = run_shape(s, end - start)
        want = int(np.prod(shape))
        batch = shape[0] if shape else 1
        per_sample = want // batch if batch else want
        given, asked = (a.size // per_sample if per_sample else 0), end - start
        if a.size != want and per_sample and a.size % per_sample == 0 and given < asked:
            raise ScriptError(f"{name}: input '{s.name}' has {given} sample(s) for the {asked} asked "
                              f"({start} to {end}); the missing ones would count as zeros in the metric")
        if a.size != want and per_sample and a.size % per_sample == 0 and a.size < want:
            pad = batch - given   # a short last batch: zero samples whose outputs are dropped
            a = np.concatenate([a.reshape(-1), np.zeros(want - a.size, a.dtype)])
        if a.size != want:
            raise ScriptError(f"{name}: input '{s.name}' has {a.size} values, "
                              f"the model takes {list(shape)} ({want})")
        inputs[s.name] = a.reshape(shape)
    return inputs, pad


def run_shape(spec, samples: int) -> tuple:
    """The input's shape for a batch of `samples`: a batch dimension the deployment file declares
    variable (input_shapes: -1..8,...) takes them all in one run; a fixed one stays as converted
    (a short last batch is padded)."""
    low, high = spec.dim_ranges.get(0, (None, None)) if spec.shape else (None, None)
    if low is not None and low <= samples and (high is None or samples <= high):
        return (samples,) + tuple(spec.shape[1:])
    return tuple(spec.shape)


def _numbers(value, name: str, spec) -> np.ndarray:
    """`value` as an array of the input's dtype; strings, objects (ragged lists, generators, paths),
    complex numbers (their imaginary part would be dropped) and the rest are refused by name."""
    try:
        a = np.asarray(value)
    except (ValueError, TypeError) as e:   # ragged nested lists
        raise ScriptError(f"{name}: input '{spec.name}' is no array of numbers ({shown(e)})") from None
    if a.dtype.kind not in "biuf":
        what = {"c": "complex numbers (the imaginary part would be dropped)", "O": "Python objects (a ragged "
                "list, a generator, paths?)", "U": "strings", "S": "bytes"}.get(a.dtype.kind, f"dtype {a.dtype}")
        raise ScriptError(f"{name}: input '{spec.name}' holds {what}, not numbers")
    try:
        return a.astype(spec.dtype)
    except (ValueError, TypeError, OverflowError) as e:
        raise ScriptError(f"{name}: input '{spec.name}' does not convert to {spec.dtype}: {shown(e)}") from None


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
    as_script(validator).postprocess(start, end, outputs)
    return pad


def evaluate(validator, run, specs, model: str = "", script: str = "", progress=None) -> AccuracyResult:
    """Every batch in order through `run`, then result(); `progress(done, total)` after each batch."""
    t0 = time.perf_counter()
    user = as_script(validator)
    size, batch = user.sample_size(), user.batch_size()
    ranges = batches(size, batch, user.where)
    padded = 0
    for i, (start, end) in enumerate(ranges):
        padded += run_batch(user, run, specs, start, end)
        if progress:
            progress(i + 1, len(ranges))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        value = user.result()
    return AccuracyResult(model, script, size, batch, len(ranges),
                          time.perf_counter() - t0, value, printed.getvalue(), padded)
