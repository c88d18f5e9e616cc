"""`report`: print the offline report of every converted model (--html/--dot: the visual report)."""
from __future__ import annotations

import sys

from mace.config import load_deployment
from mace.config.files import converted_paths, models_of
from mace.ir.model_io import load_model
from mace.report.html import visualize_model
from mace.report.offline import offline_report, render_text, source_model

HELP = "print the offline report of converted models; --html writes the visual report"


def add_arguments(p) -> None:
    p.add_argument("--html", action="store_true", help="also write <model>_index.html (as `visualize`)")
    p.add_argument("--dot", action="store_true", help="also write <model>.dot for Graphviz (and the HTML)")


def main(args) -> int:
    config = load_deployment(args.config)
    for w in config.warnings:
        print(f"warning: {config.path}: {w}", file=sys.stderr)
    for model in models_of(config, args.models):
        pb_path, data_path = converted_paths(config, model, args.build_dir)
        source = source_model(config, model, args.build_dir)
        print(render_text(offline_report(load_model(pb_path, data_path), source, pb_path, data_path,
                                         model.name)))
        if args.html or args.dot:
            files = visualize_model(config, model, args.build_dir, dot=args.dot)
            dot = f", Graphviz: {files.dot_path}" if files.dot_path else ""
            print(f"visual report: {files.html_path}{dot}")
    return 0
