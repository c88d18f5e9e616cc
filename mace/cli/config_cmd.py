"""`config`: print the resolved deployment file, every default filled in, and where each came from."""
from __future__ import annotations

import json

from mace.cli._console import console as make_console
from rich.markup import escape
from rich.table import Table

from mace.config import load_deployment, schema
from mace.config.deployment import shape_range_notes
from mace.config.files import code_names
from mace.validate.original import plan as validation_plan

HELP = "show the resolved deployment configuration (defaults filled, unknown keys warned)"


def add_arguments(p) -> None:
    p.add_argument("--json", dest="json_path", default=None, help="also write the resolved config as JSON")


LATER = {k.name: k.later for k in schema.TOP_KEYS + schema.MODEL_KEYS + schema.SUBGRAPH_KEYS if k.later}


def _rows(table: Table, prefix: str, values: dict, origin: dict, skip=()) -> None:
    for key, value in values.items():
        if key in skip:
            continue
        note = f"carried; used by {LATER[key]}" if key in LATER else ""
        table.add_row(escape(prefix + key), escape(json.dumps(value)), origin.get(key, ""), note)


def resolved_dict(config) -> dict:
    return {**{k: v for k, v in config.values.items() if k != "models"},
            "models": {name: {**{k: v for k, v in m.values.items() if k != "subgraphs"},
                              "subgraphs": {sg.name: sg.values for sg in m.subgraphs}}
                       for name, m in config.models.items()}}


def main(args) -> int:
    config = load_deployment(args.config)
    console = make_console()
    table = Table(title=escape(f"Resolved configuration of {config.path}"))
    for col in ("key", "value", "from", "note"):
        table.add_column(col)
    _rows(table, "", config.values, config.origin, skip=("models",))
    for name, model in config.models.items():
        _rows(table, f"models.{name}.", model.values, model.origin, skip=("subgraphs",))
        for sg in model.subgraphs:
            _rows(table, f"{sg.key_path}.", sg.values, sg.origin)
    console.print(table)
    for model in config.models.values():
        for sg in model.subgraphs:
            for line in shape_range_notes(sg):
                console.print(f"[yellow]note:[/yellow] {escape(line)}")
    for var, value in config.env_used.items():
        console.print(escape(f"environment: ${{{var}}} = {value}"))
    for w in config.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(f'{config.path}: {w}')}")
    if code_names(config):
        console.print(f"[yellow]note:[/yellow] {escape(code_names(config))}")
    for name, model in config.models.items():
        _, note = validation_plan(model, model.graph)
        if note:
            console.print(f"[yellow]note:[/yellow] {escape(f'models.{name}: {note}')}")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(resolved_dict(config), f, indent=2)
    return 0
