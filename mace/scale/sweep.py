"""`sweep`: every model of several deployment files x runtimes x devices: validate + benchmark
(+ the accuracy script), as one table, sweep.json / sweep.csv and an HTML page (sweep_page.py).

Each (deployment file, runtime) is converted once (built for devices when a board is in the
sweep: variants.py); then one job per (model variant, device). On Ray a device is a custom
resource `mace_device:<name>` of capacity 1, so a board runs one job at a time while boards
run side by side; in process the jobs run one after another (the per-device file locks keep
other commands off a board either way). The accuracy script runs on the host engine of the
same build: its number stands beside every device's latency for that variant.
"""
from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mace.config.fetch import local_path
from mace.config.files import models_of
from mace.devices.discovery import find_targets
from mace.devices.target_run import RunOptions, run_on_device
from mace.errors import MaceError
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
    notes: list = field(default_factory=list)


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
            if self.target.device.kind == "host":
                r = run_model(self.config, self.config.models[self.model_name], self.build_dir,
                              rounds=self.rounds, validate=True)
            else:
                opts = RunOptions(models=[self.model_name], build_dir=self.build_dir, rounds=self.rounds,
                                  validate=True, timeout=self.timeout)
                r = run_on_device(self.config, self.target, opts)[0]
        except MaceError as e:
            row.error = str(e)
            return row
        row.latency_ms, row.init_ms = r.timing.avg_ms, r.timing.init_ms
        row.cosine = min((m.cosine for m in r.metrics), default=None)
        row.passed = all(m.passed for m in r.metrics) if r.metrics else None
        row.notes = list(r.notes)
        return row


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
    """(jobs, accuracy runs to do [(config, model, variant)]): conversions happen here."""
    jobs, accuracy = [], []
    for config in configs:
        found = find_targets(config, device_yml, device_names, None, known_hosts, timeout=min(timeout, 30.0))
        for note in found.notes:
            notify(note)
        boards = any(t.device.kind != "host" for t in found.targets)
        for model in models_of(config, None):
            for runtime in runtimes:
                notify(f"converting {model.name} of {config.path} for {runtime}")
                v = variant_lib.prepare(config, model, runtime, build_dir, package=boards, fresh=True)
                jobs += [SweepJob(v.config, model.name, runtime, v.build_dir, t, rounds, timeout)
                         for t in found.targets]
                if model.graph.values.get(ACCURACY_KEY):
                    accuracy.append((v, model.name, runtime))
    return jobs, accuracy


def run_sweep(configs: list, runtimes: list, device_names=(), device_yml=None, build_dir=None,
              cluster: Cluster | None = None, rounds: int = 10, timeout: float = 300.0, progress=None,
              notify=None) -> list:
    notify = notify or (lambda message: None)
    cluster = cluster or Cluster()
    known_hosts = Path(build_dir or "builds").resolve() / "known_hosts"
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    jobs, accuracy = plan(configs, runtimes, device_names, device_yml, build_dir, known_hosts, rounds,
                          timeout, notify)
    total = len(jobs) + len(accuracy)
    rows = run_tasks(jobs, cluster, lambda job: job.resource,
                     lambda done: progress and progress(done, total))
    scores = {}
    for i, (v, name, runtime) in enumerate(accuracy):
        model = v.config.models[name]
        script = local_path(model.graph.values[ACCURACY_KEY], v.config.base_dir)
        try:
            run = sharded_accuracy.evaluate(v.config, model, v.build_dir, script,
                                            f"{v.config.path}: {model.graph.key_path}.{ACCURACY_KEY}",
                                            cluster, runtime, notify=notify)
            scores[(str(v.config.path), name, runtime)] = run.result.result
        except MaceError as e:
            notify(f"accuracy of {name} ({runtime}) failed: {e}")
        if progress:
            progress(len(jobs) + i + 1, total)
    for row in rows:
        result = scores.get((row.config, row.model, row.runtime))
        row.accuracy_result, row.accuracy = result, headline(result)
    return rows


COLUMNS = ("config", "model", "runtime", "device", "latency_ms", "init_ms", "cosine", "passed", "accuracy",
           "error")


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
