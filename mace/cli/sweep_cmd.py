"""`sweep`: validate + benchmark (+ accuracy script) for every model x runtime x device of
several deployment files; a table, sweep.json / sweep.csv and sweep.html (docs/scale.md)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from mace.cli import _cluster
from mace.cli._console import console as make_console
from mace.cli._devices import seconds
from mace.cli._progress import sample_bar
from mace.config import load_deployment
from mace.devices.device_yml import load_device_yml
from mace.errors import ConfigError, ValidationFailed
from mace.scale import variants as variant_lib
from mace.scale.runner import session
from mace.scale.sweep import run_sweep, write_outputs
from mace.scale.sweep_page import write_page

HELP = "validate + benchmark (+ accuracy script) every model x runtime x device, with an HTML summary"
MULTI_CONFIG = True   # main.py: --config may repeat
EPILOG = """Every job gets its row whatever fails (a model that does not convert, a board not found, a run or
accuracy script that fails: the row's error says why); a gpu job that ran on a board's CPU reads
'gpu (ran on CPU)'. Exit 1 when any row has an error or a validation FAIL."""


def add_arguments(p) -> None:
    p.add_argument("--runtimes", default="cpu", metavar="LIST",
                   help=f"variants to convert and run ({', '.join(variant_lib.VARIANTS)}; comma-separated)")
    p.add_argument("--devices", action="append", default=None, metavar="NAMES",
                   help="devices to run on: 'all' (every device of the devices .yml that the deployment "
                        "file's target_abis fit, and the host) or names (repeatable, comma-separated)")
    p.add_argument("--device_yml", default=None, metavar="PATH", help="devices .yml in MACE's schema")
    p.add_argument("--round", type=_rounds, default=10, help="timed runs per model, runtime and device")
    p.add_argument("--device_timeout", type=seconds, default=300.0, metavar="S",
                   help="seconds each step on a device may take")
    p.add_argument("--output_dir", default=None, metavar="DIR",
                   help="where sweep.json, sweep.csv and sweep.html go (default: <build_dir>/sweep)")
    _cluster.add_arguments(p)


MAX_ROUNDS = 1_000_000


def _rounds(text: str) -> int:
    """--round: a whole number of timed runs, 1 to MAX_ROUNDS (as `run` checks its flags)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_ROUNDS}, got {text!r}")
    return value


def _check_before_running(configs, out: str) -> None:
    """What would fail after minutes of converting and running: builds that would overwrite
    each other, and an output folder that cannot be made."""
    seen = {}
    for config in configs:
        other = seen.setdefault(config.library_name, config.path)
        if other != config.path:
            raise ConfigError(f"{config.path}: library_name '{config.library_name}' is also {other}'s: "
                              f"their builds would overwrite each other under one build folder; give "
                              f"each deployment file its own library_name")
    if Path(out).exists() and not Path(out).is_dir():
        raise ConfigError(f"--output_dir {out}: not a folder (a file of that name exists)")
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--output_dir {out}: cannot create the folder ({e.strerror})") from None


def _say(message: str) -> None:
    print(f"note: {message}", file=sys.stderr, flush=True)


def main(args) -> int:
    configs = [load_deployment(path) for path in args.config]
    runtimes = variant_lib.parse(args.runtimes)
    out = args.output_dir or f"{args.build_dir}/sweep"
    _check_before_running(configs, out)
    names = [] if not args.devices or args.devices == ["all"] else args.devices
    cluster = _cluster.cluster_of(args)
    console = make_console()
    for note in cluster.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    resources = {f"mace_device:{d}": 1 for d in ["host", *_device_names(args)]}
    with session(cluster, resources, notify=_say), sample_bar(console, f"sweep ({cluster.describe})") as bar:
        task = bar.add_task("jobs", total=None)
        rows = run_sweep(configs, runtimes, names, args.device_yml, args.build_dir, cluster, args.round,
                         args.device_timeout, progress=lambda n, total: bar.update(task, completed=n, total=total),
                         notify=_say)
    _print(console, rows)
    json_path, csv_path = write_outputs(rows, out)
    page = write_page(rows, f"{out}/sweep.html")
    console.print(f"sweep of {len(rows)} runs: {escape(str(json_path))}, {escape(str(csv_path))}, "
                  f"{escape(str(page))}")
    failed = [r for r in rows if r.failed]   # an error or a validation FAIL: exit 1
    if failed:
        raise ValidationFailed(f"{len(failed)} of {len(rows)} sweep runs failed: "
                               + "; ".join(f"{r.model} ({r.runtime}) on {r.device}: {r.why()}" for r in failed))
    return 0


def _device_names(args) -> list:
    """Every device the devices .yml lists (a Ray resource each); unknown names fail later, clearly."""
    if not args.device_yml:
        return []
    return [d.name for d in load_device_yml(args.device_yml, None)[0]]


def _f(v, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)


def _print(console, rows: list) -> None:
    """One row per job; a GPU runtime that ran on the CPU reads `gpu (ran on CPU)`, the reason in
    `note`; errors whole (a terminal folds them, a log keeps them on one line)."""
    table = Table(title="Sweep")
    for col in ("model", "runtime", "device", "latency(ms)", "cosine", "validation", "accuracy", "note / error"):
        table.add_column(col, overflow="fold")
    for r in rows:
        check = "-" if r.passed is None else ("[green]PASS[/green]" if r.passed else "[red]FAIL[/red]")
        runtime = f"{r.runtime} [yellow](ran on CPU)[/yellow]" if r.fallback else r.runtime
        note = f"[red]{escape(r.error)}[/red]" if r.error else \
            f"[yellow]fallback to the CPU: {escape(r.fallback)}[/yellow]" if r.fallback else ""
        table.add_row(escape(r.model), runtime, escape(r.device), _f(r.latency_ms, "{:.3f}"), _f(r.cosine, "{:.5f}"),
                      check, _f(r.accuracy, "{:.4f}"), note)
    console.print(table)
