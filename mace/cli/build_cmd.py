"""`build`: convert, then put what a device needs under builds/<library_name>/ (docs/devices.md)."""
from __future__ import annotations

import sys

from rich.markup import escape
from rich.table import Table

from mace.build import build_library
from mace.cli import _overrides
from mace.cli._console import console as make_console
from mace.config import load_deployment
from mace.config.files import code_names
from mace.config.hints import command_hint

HELP = "convert, then lay out what a device needs: models, OpenCL files, the runner mace_run.pyz"


def add_arguments(p) -> None:
    pass  # the common flags say it all: --config, --build_dir, --model_name


def main(args) -> int:
    config = load_deployment(args.config)
    _overrides.apply(config, args)  # MACE's --target_abis, --model_graph_format, ...
    console = make_console()
    for w in config.warnings:
        print(f"warning: {config.path}: {w}", file=sys.stderr)
    result = build_library(config, args.build_dir, args.models)
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for r in result.converted:
        console.print(f"Model {r.model} converted")
    table = Table(title=f"Build of library {escape(config.library_name)} in {escape(str(result.library_dir))}/")
    for col in ("what", "file", "size"):
        table.add_column(col)
    for r in result.converted:
        for path in (r.pb_path, r.data_path):
            table.add_row(f"model {r.model}", escape(str(path)), _size(path))
    for abi, path in result.runners.items():
        table.add_row(f"runner for {abi}", escape(str(path)), _size(path))
    for path in result.opencl:
        table.add_row("OpenCL", escape(str(path)), _size(path))
    table.add_row("manifest", escape(str(result.manifest)), _size(result.manifest))
    console.print(table)
    if code_names(config):
        console.print(escape(code_names(config)))
    console.print(f"Run it on a device: python3 mace_run.pyz --model <model>.pb --input NAME=FILE.npy "
                  f"--output_dir DIR, or `{escape(command_hint('run', config, args.build_dir))}` with a "
                  f"device (docs/devices.md)")
    return 0


def _size(path) -> str:
    return f"{path.stat().st_size / 1024:.1f} KiB"
