"""`visualize`: one self-contained HTML page per converted model (and a Graphviz file with --dot)."""
from __future__ import annotations

import sys

from mace.cli._console import console as make_console
from rich.markup import escape

from mace.config import load_deployment
from mace.config.files import models_of
from mace.config.hints import command_hint
from mace.report.html import visualize_model

HELP = "write an HTML report per model: graph, latency per layer, memory timeline, offline report"


def add_arguments(p) -> None:
    p.add_argument("--dot", action="store_true", help="also write <model>.dot for Graphviz")
    p.add_argument("--output_dir", default=None, metavar="DIR",
                   help="write the files here (default: builds/<library>/model/)")


def main(args) -> int:
    config = load_deployment(args.config)
    console = make_console()
    for w in config.warnings:
        print(f"warning: {config.path}: {w}", file=sys.stderr)
    for model in models_of(config, args.models):
        files = visualize_model(config, model, args.build_dir, args.output_dir, dot=args.dot)
        console.print(f"Model {files.model}: {files.nodes} ops -> {escape(str(files.html_path))}")
        if files.dot_path:
            dot = escape(str(files.dot_path))
            console.print(f"  Graphviz: {dot} (dot -Tsvg -O {dot})")
        if not files.has_benchmark:
            how = command_hint("benchmark", config, args.build_dir)
            console.print(f"  no benchmark data yet: run `{escape(how)}` for the latency chart")
    return 0
