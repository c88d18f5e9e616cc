"""MACE's accuracy_validation_script over shards of its samples, in process or on Ray.

Each worker (AccuracyJob.open) makes its own AccuracyValidator and opens the engine once; for
each shard it calls preprocess and runs the model (mace.validate.accuracy.infer) and hands the
outputs back. The driver saves them per shard (ShardStore, under builds/<library>/accuracy/)
and calls its own validator's postprocess strictly in sample order, however the shards
finish, then result(): a script that keeps state (running sums, a confusion matrix, a
detection list) sees exactly the calls of a single-process run.
"""
from __future__ import annotations

import contextlib
import io
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from mace.errors import ModelError
from mace.report.session import open_model
from mace.runtime.affinity import thread_limit
from mace.scale.runner import fail_hook, run_shards
from mace.scale.shards import ShardStore, fingerprint, plan, shard_size
from mace.validate.accuracy import AccuracyResult, batches, infer, load_validator


@dataclass
class AccuracyJob:
    config: object
    model_name: str
    build_dir: object
    script: str
    where: str
    outputs: tuple = ()
    num_threads: int = -1
    fail: tuple | None = None       # the test hook (runner.FAIL_HOOK)
    marker: str = ""                # where the 'exit' hook remembers it fired

    def open(self):
        validator = load_validator(self.script, self.where)
        with thread_limit(self.num_threads):
            session = open_model(self.config, self.config.models[self.model_name], self.build_dir)
        return validator, session.engine, session.subgraph.inputs

    def run(self, state, shard) -> dict:
        validator, engine, specs = state
        self._maybe_fail(shard)
        arrays = {}
        with thread_limit(self.num_threads):
            for j, (start, end) in enumerate(shard.ranges):
                outputs, pad = infer(validator, engine.run, specs, start, end)
                for k, name in enumerate(self.outputs):   # by position: names may hold any character
                    arrays[f"b{j}_o{k}"] = outputs[name]
                arrays[f"b{j}_pad"] = pad
        return arrays

    def _maybe_fail(self, shard) -> None:
        if not self.fail or self.fail[0] != shard.index:
            return
        if self.fail[1] == "exit":
            if not os.path.exists(self.marker):
                Path(self.marker).write_text("fired\n")
                os._exit(17)   # a worker dying mid-run, as the test hook asks
            return
        raise ModelError(f"test hook {self.fail}: shard {shard.index} fails as asked")


@dataclass
class ShardedRun:
    result: AccuracyResult
    shards: int
    resumed: int          # shards taken from disk
    directory: Path


def shard_problem(arrays: dict, shard, names) -> str:
    """What makes a resumed shard's arrays other than what AccuracyJob.run saves for `shard` with
    outputs `names` ('' when they fit): one output array per batch and name, numbers (no
    object, string or structured array), and each batch's padding a whole number from 0."""
    want = {f"b{j}_{k}" for j in range(len(shard.ranges)) for k in [*(f"o{i}" for i in range(len(names))), "pad"]}
    if set(arrays) != want:
        return f"arrays {sorted(arrays)[:8]}, expected {sorted(want)[:8]}"
    for key, value in arrays.items():
        if value.dtype.kind not in "biuf":
            return f"{key}: dtype {value.dtype}, not numbers"
        if key.endswith("_pad") and (value.shape != () or value.dtype.kind not in "iu" or int(value) < 0):
            return f"{key}: {value.dtype} {list(value.shape)}, not a whole number from 0"
        if not key.endswith("_pad") and value.ndim == 0:
            return f"{key}: a scalar, not a batch of outputs"
    return ""


def resumable(store, done: set, shards: list, names) -> set:
    """The shards of `done` (on disk, sha256 as recorded) whose arrays fit (shard_problem); the
    others are removed from the store and run again. Each is read once here, not kept."""
    kept = set()
    for i in sorted(done):
        try:
            problem = shard_problem(store.load(i), shards[i], names)
        except (OSError, ValueError, EOFError, KeyError, RuntimeError, NotImplementedError, zipfile.BadZipFile) as e:
            problem = f"unreadable ({type(e).__name__})"
        if problem:
            store.discard(i)
        else:
            kept.add(i)
    return kept


def store_dir(session, variant: str) -> Path:
    """builds/<library>/accuracy/<model>/<variant>/"""
    return session.pb_path.parent.parent / "accuracy" / session.model.name / variant


def evaluate(config, model, build_dir, script, where: str, cluster, variant: str = "",
             num_threads: int = -1, resume: bool = True, progress=None, notify=None) -> ShardedRun:
    """The script over every sample on `cluster`; `progress(samples_done, total)`."""
    t0 = time.perf_counter()
    validator = load_validator(script, where)
    session = open_model(config, model, build_dir)
    size, batch = int(validator.sample_size()), int(validator.batch_size())
    ranges = batches(size, batch, validator.where)
    shards = plan(ranges, shard_size(len(ranges), cluster.workers if cluster.kind == "ray" else 1))
    names = sorted(o.name for o in model.graph.outputs)
    files = [p for p in (session.pb_path, session.pb_path.with_suffix(".data")) if p.is_file()] + [script]
    key = fingerprint(files, size=size,
                      batch=batch, shards=[s.ranges for s in shards], outputs=names, variant=variant)
    store = ShardStore(store_dir(session, variant or model.graph.runtime), key)
    done = resumable(store, store.open(resume, len(shards)), shards, names)
    job = AccuracyJob(config, model.name, build_dir, str(script), where, tuple(names), num_threads, fail_hook(),
                      str(store.directory / ".fail_hook_fired"))
    order = iter(shards)
    state = {"next": next(order, None), "padded": 0, "samples": sum(shards[i].samples for i in done)}

    def drain() -> None:   # postprocess every shard that is on disk, in sample order
        while state["next"] is not None and state["next"].index in done:
            shard = state["next"]
            arrays = store.load(shard.index)
            for j, (start, end) in enumerate(shard.ranges):
                outputs = {name: arrays[f"b{j}_o{k}"] for k, name in enumerate(names)}
                validator.postprocess(start, end, outputs)
                state["padded"] += int(arrays[f"b{j}_pad"])
            state["next"] = next(order, None)

    def on_result(shard, arrays) -> None:
        store.save(shard.index, arrays)
        done.add(shard.index)
        state["samples"] += shard.samples
        if progress:
            progress(state["samples"], size)
        drain()

    resumed = len(done)
    if progress:
        progress(state["samples"], size)
    drain()
    run_shards(job, [s for s in shards if s.index not in done], cluster, on_result, notify)
    drain()
    if state["next"] is not None:
        raise ModelError(f"shard {state['next'].index} has no result: the run did not finish")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        value = validator.result()
    store.remove()   # finished: the next run starts afresh
    r = AccuracyResult(model.name, str(script), size, batch, len(ranges), time.perf_counter() - t0, value,
                       printed.getvalue(), state["padded"])
    return ShardedRun(r, len(shards), resumed, store.directory)
