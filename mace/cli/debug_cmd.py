"""`debug`: name the first node where each runtime diverges from the framework (and from CPU)."""
from __future__ import annotations

import sys

from mace.cli._console import console as make_console
from mace.cli._layers_view import describe, print_findings, print_layers
from mace.config import load_deployment
from mace.config.files import models_of
from mace.errors import ValidationFailed
from mace.report.session import open_model
from mace.runtime.affinity import thread_limit
from mace.util.jsonutil import dumps
from mace.validate.divergence import locate_divergence

HELP = "find the first node where a runtime diverges from the original framework (no bisection)"


def add_arguments(p) -> None:
    p.add_argument("--input_dir", default=None, metavar="DIR",
                   help="read each input from DIR/<input name>.npy ('/', ':' in names become '_')")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--omp_num_threads", "--num_threads", dest="num_threads", type=int, default=-1,
                   help="CPU threads for BLAS and the framework; -1: library default")
    p.add_argument("--json", dest="json_path", default=None, metavar="PATH",
                   help="write every comparison as JSON")


def locate(config, model, args):
    with thread_limit(args.num_threads):
        session = open_model(config, model, args.build_dir, args.input_dir, args.seed)
        return locate_divergence(session, max(args.num_threads, 0))


def report_findings(console, report) -> list:
    """Print one model's findings (tables of the failing comparisons); the failure sentences."""
    print_findings(console, report)
    failures = []
    for f in report.findings:
        if f.first is not None:
            print_layers(console, f.validation)
            failures.append(f"{report.model} on {f.runtime} vs {f.against}: diverges at {describe(f.first)}")
        elif f.validation is not None and not f.validation.checks:   # compared nothing: not "no divergence"
            failures.append(f"{report.model} on {f.runtime} vs {f.against}: no tensor compared "
                            f"({f.validation.why_nothing()})")
    return failures


def main(args) -> int:
    config = load_deployment(args.config)
    console = make_console()
    for w in config.warnings:
        print(f"warning: {config.path}: {w}", file=sys.stderr)
    failures, reports = [], []
    for model in models_of(config, args.models):
        report = locate(config, model, args)
        reports.append(report)
        failures += report_findings(console, report)
    if args.json_path:
        with open(args.json_path, "w") as f:
            f.write(dumps({"library": config.library_name, "models": reports}))
    if failures:
        raise ValidationFailed("; ".join(failures))
    return 0
