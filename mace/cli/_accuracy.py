"""`run` with `accuracy_validation_script` in the .yml: MACE's accuracy plugin over its data set,
for the model as built and any other variants asked for (--accuracy_runtimes: cpu, gpu, dsp,
quantized), in this process or sharded over Ray workers (--cluster ray; mace/scale/), with a
progress bar. The results print side by side and are saved to
builds/<library>/<model>_accuracy.json."""
from __future__ import annotations

import json
import sys

from rich.markup import escape
from rich.table import Table

from mace.cli._cluster import cluster_of
from mace.cli._progress import sample_bar
from mace.config.fetch import local_path
from mace.config.files import library_dir, models_of
from mace.scale import variants as variant_lib
from mace.scale.accuracy import evaluate
from mace.scale.runner import session
from mace.validate.accuracy import shown as shown_value

KEY = "accuracy_validation_script"


def add_arguments(p) -> None:
    p.add_argument("--accuracy_runtimes", default=None, metavar="LIST",
                   help="run the accuracy_validation_script for these variants of each model too, side by "
                        f"side ({', '.join(variant_lib.VARIANTS)}; comma-separated); each other than the "
                        "built one is converted into builds/<library>/variants/<variant>/; default: the "
                        "model as built")


def wanted(config, names) -> list:
    return [m for m in models_of(config, names) if m.graph.values.get(KEY)]


def _say(message: str) -> None:
    print(f"note: {message}", file=sys.stderr, flush=True)


def main(args, config, console) -> list:
    """Run every model's script on every variant asked for; returns [(variant, ShardedRun)]."""
    if getattr(args, "accuracy_runtimes", None) is not None:   # a mistake to report, not to ignore
        variant_lib.parse(args.accuracy_runtimes, "--accuracy_runtimes")
    models = wanted(config, args.models)
    if not models:
        return []
    cluster = cluster_of(args)
    for note in cluster.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    with session(cluster, notify=lambda note: console.print(f"[yellow]note:[/yellow] {escape(note)}")):
        return [row for model in models for row in _model(args, config, console, model, cluster)]


def _model(args, config, console, model, cluster) -> list:
    sg = model.graph
    script = local_path(sg.values[KEY], config.base_dir)
    where = f"{config.path}: {sg.key_path}.{KEY}"
    names = [variant_lib.label(sg)]
    if getattr(args, "accuracy_runtimes", None) is not None:   # '' is a mistake, not "the default"
        names = variant_lib.parse(args.accuracy_runtimes, "--accuracy_runtimes")
    rows = []
    for name in names:
        v = variant_lib.prepare(config, model, name, args.build_dir)
        with sample_bar(console, f"accuracy of {model.name} ({name}, {cluster.describe})") as bar:
            task = bar.add_task("samples", total=None)
            run = evaluate(v.config, v.config.models[model.name], v.build_dir, script, where, cluster,
                           name, args.num_threads, getattr(args, "resume", True),
                           progress=lambda n, total: bar.update(task, completed=n, total=total),
                           notify=_say)
        r = run.result
        if run.resumed:
            console.print(f"resumed {run.resumed} of {run.shards} shards from {escape(str(run.directory))}")
        if r.printed:
            console.print(escape(r.printed.rstrip("\n")))
        rows.append((name, run))
    path = library_dir(config, args.build_dir) / f"{model.name}_accuracy.json"
    first = rows[0][1].result.to_dict()
    first.update(runtime=rows[0][0], cluster=cluster.describe,
                 variants=[dict(run.result.to_dict(), runtime=name) for name, run in rows])
    path.write_text(json.dumps(first, indent=2))
    _print_table(console, model.name, rows, cluster)
    console.print(f"saved to {escape(str(path))}")
    return rows


def _print_table(console, model: str, rows: list, cluster) -> None:
    table = Table(title=f"Accuracy of {escape(model)} ({escape(cluster.describe)})")
    for col in ("runtime", "samples", "batches", "result", "seconds", "samples/s"):
        table.add_column(col, justify="left" if col in ("runtime", "result") else "right")
    for name, run in rows:
        r = run.result
        shown = "-" if r.result is None else shown_value(r.result)
        table.add_row(name, str(r.samples), f"{r.batches} x {r.batch_size}", escape(shown), f"{r.seconds:.2f}",
                      f"{r.samples / r.seconds:.1f}" if r.seconds else "-")
    console.print(table)
