"""`sweep`: every model of several deployment files x runtimes x devices: validate + benchmark
(+ the accuracy script), as one table, sweep.json / sweep.csv and an HTML page (sweep_page.py).

Each (deployment file, runtime) is converted once (built for devices when a board is in the
sweep: variants.py); then one job per (model variant, device). On Ray a device is a custom
resource `mace_device:<name>` of capacity 1, so a board runs one job at a time while boards
run side by side; in process the jobs run one after another (the per-device file locks keep
other commands off a board either way). The accuracy script runs on the host engine of the
same build: its number stands beside every device's latency for that variant.

Every job gets its row, whatever fails: a model that does not convert, a deployment file whose
devices cannot be found, a run or an accuracy script that fails, each puts its reason in the
`error` of the rows it concerns and the sweep goes on. A GPU runtime that ran on a board's CPU
(no pyopencl or OpenCL device there) says so in `fallback`.
"""
from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mace.config.fetch import local_path
from mace.config.files import models_of
from mace.devices.discovery import find_targets
from mace.devices.target_run import run_on_device
from mace.runtime.run_options import RunOptions
from mace.errors import ConfigError, MaceError
from mace.run import run_model
from mace.scale import accuracy as sharded_accuracy
from mace.scale import variants as variant_lib
from mace.scale.runner import Cluster, run_tasks

ACCURACY_KEY = "accuracy_validation_script"


@dataclass
class SweepRow:
    config: str
    model: str
    runtime: str
    device: str
    latency_ms: float | None = None     # mean of the timed rounds
    init_ms: float | None = None
    cosine: float | None = None         # the lowest over the outputs (run --validate)
    passed: bool | None = None
    accuracy: float | None = None       # the script's top-level number (top1, or the first number)
    accuracy_result: object = None
    error: str = ""
    fallback: str = ""                  # why a GPU runtime ran on the CPU ("" when it did not)
    notes: list = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """An error, or a validation that did not pass."""
        return bool(self.error) or self.passed is False

    def why(self) -> str:
        if self.error:
            return self.error
        return f"validation FAIL (lowest cosine {self.cosine:.6f})" if self.passed is False else ""


@dataclass
class SweepJob:
    config: object
    model_name: str
    runtime: str
    build_dir: object
    target: object          # discovery.Target
    rounds: int
    timeout: float

    @property
    def resource(self) -> str:
        return f"mace_device:{self.target.device.name}"

    def __call__(self) -> SweepRow:
        row = SweepRow(str(self.config.path), self.model_name, self.runtime, self.target.device.name)
        try:
            opts = RunOptions(models=[self.model_name], build_dir=self.build_dir, rounds=self.rounds,
                              validate=True, timeout=self.timeout)   # one object, host or board
            if self.target.device.kind == "host":
                r = run_model(self.config, self.config.models[self.model_name], opts=opts)
            else:
                r = run_on_device(self.config, self.target, opts)[0]
        except Exception as e:  # noqa: BLE001 - whatever fails, the job's row says so and the sweep goes on
            row.error = failure(e)
            return row
        row.latency_ms, row.init_ms = r.timing.avg_ms, r.timing.init_ms
        row.cosine = min((m.cosine for m in r.metrics), default=None)
        row.passed = all(m.passed for m in r.metrics) if r.metrics else False
        if not r.metrics:   # a validation of nothing has not passed
            row.error = "validation compared no output"
        row.fallback = r.fallback
        row.notes = list(r.notes)
        return row


def failure(e: Exception) -> str:
    """A row's error: a MaceError's message; anything else named as the internal error it is."""
    return str(e) if isinstance(e, MaceError) else f"internal error: {type(e).__name__}: {e}"


def headline(value) -> float | None:
    """The number a result stands for: itself, `top1`, or its first number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        if isinstance(value.get("top1"), (int, float)):
            return float(value["top1"])
        return next((float(v) for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)),
                    None)
    return None


def plan(configs: list, runtimes: list, device_names, device_yml, build_dir, known_hosts, rounds: int,
         timeout: float, notify) -> tuple:
    """(entries, accuracy runs to do [(config, model, variant)]); an entry is a SweepJob to run or,
    for a job that cannot run, its SweepRow saying why. Conversions happen here; one that fails
    gives each of its jobs such a row and the others go on."""
    entries, accuracy = [], []
    for config in configs:
        models = models_of(config, None)
        try:
            found = find_targets(config, device_yml, device_names, None, known_hosts, timeout=min(timeout, 30.0))
        except MaceError as e:
            notify(f"{config.path}: no device to run on: {e}")
            entries += [SweepRow(str(config.path), m.name, rt, "-", error=f"no device: {e}")
                        for m in models for rt in runtimes]
            continue
        for note in found.notes:
            notify(note)
        boards = any(t.device.kind != "host" for t in found.targets)
        for model in models:
            for runtime in runtimes:
                notify(f"converting {model.name} of {config.path} for {runtime}")
                try:
                    v = variant_lib.prepare(config, model, runtime, build_dir, package=boards, fresh=True)
                except Exception as e:  # noqa: BLE001 - one model's failure must not stop the others
                    why = f"{'build' if boards else 'convert'} failed: {failure(e)}"
                    notify(f"{model.name} of {config.path} ({runtime}): {why}")
                    entries += [SweepRow(str(config.path), model.name, runtime, t.device.name, error=why)
                                for t in found.targets]
                    continue
                entries += [SweepJob(v.config, model.name, runtime, v.build_dir, t, rounds, timeout)
                            for t in found.targets]
                if model.graph.values.get(ACCURACY_KEY):
                    accuracy.append((v, model.name, runtime))
    return entries, accuracy


def run_sweep(configs: list, runtimes: list, device_names=(), device_yml=None, build_dir=None,
              cluster: Cluster | None = None, rounds: int = 10, timeout: float = 300.0, progress=None,
              notify=None) -> list:
    notify = notify or (lambda message: None)
    cluster = cluster or Cluster()
    known_hosts = Path(build_dir or "builds").resolve() / "known_hosts"
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    entries, accuracy = plan(configs, runtimes, device_names, device_yml, build_dir, known_hosts, rounds,
                             timeout, notify)
    if not entries:   # a sweep of nothing has not passed
        raise ConfigError("the sweep has no job: no model, runtime and device to run")
    jobs = [e for e in entries if isinstance(e, SweepJob)]
    total = len(jobs) + len(accuracy)
    done = iter(run_tasks(jobs, cluster, lambda job: job.resource, lambda n: progress and progress(n, total)))
    rows = [next(done) if isinstance(e, SweepJob) else e for e in entries]   # in plan order
    scores, errors = {}, {}
    for i, (v, name, runtime) in enumerate(accuracy):
        model = v.config.models[name]
        script = local_path(model.graph.values[ACCURACY_KEY], v.config.base_dir)
        key = (str(v.config.path), name, runtime)
        try:
            run = sharded_accuracy.evaluate(v.config, model, v.build_dir, script,
                                            f"{v.config.path}: {model.graph.key_path}.{ACCURACY_KEY}",
                                            cluster, runtime, notify=notify)
            scores[key] = run.result.result
        except Exception as e:  # noqa: BLE001 - it goes into the rows of that variant
            errors[key] = f"accuracy failed: {failure(e)}"
            notify(f"accuracy of {name} ({runtime}) failed: {failure(e)}")
        if progress:
            progress(len(jobs) + i + 1, total)
    for row in rows:
        key = (row.config, row.model, row.runtime)
        result = scores.get(key)
        row.accuracy_result, row.accuracy = result, headline(result)
        if key in errors:
            row.error = "; ".join(filter(None, (row.error, errors[key])))
    return rows


COLUMNS = ("config", "model", "runtime", "device", "latency_ms", "init_ms", "cosine", "passed", "accuracy",
           "fallback", "error")


def write_outputs(rows: list, out_dir) -> tuple:
    """sweep.json and sweep.csv in out_dir; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out_dir / "sweep.json", out_dir / "sweep.csv"
    json_path.write_text(json.dumps({"rows": [asdict(r) for r in rows]}, indent=2, default=repr))
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([getattr(r, c) if getattr(r, c) is not None else "" for c in COLUMNS])
    return json_path, csv_path
