"""`run` with `accuracy_validation_script` in the .yml: MACE's accuracy plugin over its data set,
through the host engine in this process (mace/validate/accuracy.py), with a progress bar. The
result is printed and saved to builds/<library>/<model>_accuracy.json."""
from __future__ import annotations

import json

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from mace.config.fetch import local_path
from mace.report.session import open_model
from mace.runtime.affinity import thread_limit
from mace.config.files import models_of
from mace.validate.accuracy import evaluate, load_validator

KEY = "accuracy_validation_script"


def wanted(config, names) -> list:
    return [m for m in models_of(config, names) if m.graph.values.get(KEY)]


def main(args, config, console) -> list:
    """Run every model's script; returns the AccuracyResults."""
    results = []
    for model in wanted(config, args.models):
        sg = model.graph
        script = local_path(sg.values[KEY], config.base_dir)
        where = f"{config.path}: {sg.key_path}.{KEY}"
        validator = load_validator(script, where)
        with thread_limit(args.num_threads):
            session = open_model(config, model, args.build_dir)
            with Progress(TextColumn(f"accuracy of {escape(model.name)}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("batches"), TimeRemainingColumn(), console=console,
                          transient=True) as bar:
                task = bar.add_task("batches", total=None)
                r = evaluate(validator, session.engine.run, sg.inputs, model.name, str(script),
                             progress=lambda done, total: bar.update(task, completed=done, total=total))
        path = session.pb_path.parent.parent / f"{model.name}_accuracy.json"
        path.write_text(json.dumps(r.to_dict(), indent=2))
        if r.printed:
            console.print(escape(r.printed.rstrip("\n")))
        shown = "" if r.result is None else f": result {escape(repr(r.result))}"
        console.print(f"Accuracy of {escape(model.name)} over {r.samples} samples ({r.batches} batches of "
                      f"{r.batch_size}, {r.seconds:.1f} s){shown}; saved to {escape(str(path))}")
        results.append(r)
    return results
