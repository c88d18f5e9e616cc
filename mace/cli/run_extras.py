"""The report flags of `run`: --benchmark, --report, --validate_all_layers (and check_tensors with
--validate), MACE's --layers and --gpu_out_of_range_check, --dump_tensors, --locate_divergence.
They run on the host engine after the normal run.
"""
from __future__ import annotations

import json
from pathlib import Path

from rich.markup import escape

from mace.cli._layers_view import print_layers
from mace.cli.benchmark_cmd import benchmark_lines
from mace.cli.debug_cmd import locate, report_findings
from mace.config.files import models_of
from mace.report.benchmark_model import benchmark_model
from mace.errors import ConfigError
from mace.report.dump import dump_tensors
from mace.report.online import online_report, render_text
from mace.report.session import open_model
from mace.runtime.affinity import thread_limit, wait_options
from mace.util.jsonutil import plain
from mace.validate.layers import validate_layers
from mace.validate.range_check import check_ranges

FLAGS = ("benchmark", "report", "validate_all_layers", "dump_tensors", "locate_divergence", "layers",
         "gpu_out_of_range_check")


def add_arguments(p) -> None:
    p.add_argument("--benchmark", action="store_true",
                   help="print MACE's benchmark tables (as the `benchmark` command, --round runs each)")
    p.add_argument("--report", action="store_true",
                   help="print the execution report: runtime, memory, per-layer latency")
    p.add_argument("--validate_all_layers", action="store_true",
                   help="compare every intermediate tensor with the framework; writes "
                        "builds/<library>/model/<model>_layers.csv; fails when a tensor fails or none was "
                        "compared")
    p.add_argument("--dump_tensors", default=None, metavar="DIR",
                   help="write every node's outputs to DIR/<model>/NNNN_<tensor>.npy (+ tensors.csv)")
    p.add_argument("--locate_divergence", action="store_true",
                   help="name the first node where each runtime diverges (as the `debug` command)")
    p.add_argument("--layers", default=None, metavar="START:END",
                   help="MACE's layer-by-layer validation of the mapped layers START:END (a python "
                        "slice, or one index; MACE's -1 means off); as --validate_all_layers otherwise")
    p.add_argument("--gpu_out_of_range_check", action="store_true",
                   help="check every node output for NaN/Inf and, with fp16 storage (data_type fp16_*), "
                        "for values beyond half's range or mostly below its normal range (GPU ops: "
                        "counted by the stores before the half conversion); fails the run when one "
                        "is found and names the gpu_fp32_ops fix")


RANGE = "out of range:"   # marks the range check's failures among the layer checks


def layer_slice(text: str | None) -> slice | None:
    """MACE's --layers: 'start:end' (python slice) or 'i' (that layer only); '-1' (MACE's default)
    or nothing: not asked for."""
    if text is None or text.strip() == "-1":
        return None
    parts = text.split(":")
    try:
        if len(parts) == 1:
            i = int(parts[0])
            return slice(i, i + 1)
        if len(parts) == 2:
            return slice(*(int(x) if x.strip() else None for x in parts))
    except ValueError:
        pass
    raise ConfigError(f"--layers {text!r}: expected start:end (python slice) or one layer index")


def _wanted(args, model) -> bool:
    checks = args.validate and bool(model.graph.values.get("check_tensors"))
    return checks or layer_slice(args.layers) is not None or \
        any(getattr(args, f, None) for f in FLAGS if f != "layers")


def main(args, config, console) -> list:
    """Do what the flags ask for every model; returns failure messages (the caller raises)."""
    failures, extra = [], {}
    for model in models_of(config, args.models):
        if not _wanted(args, model):
            continue
        extra[model.name] = data = {}
        failures += _one_model(args, config, model, console, data)
    if extra and args.json_path and Path(args.json_path).exists():
        _merge_json(Path(args.json_path), extra)
    return failures


def _one_model(args, config, model, console, data: dict) -> list:
    failures = []
    threads = args.num_threads
    if args.benchmark:
        r = benchmark_model(config, model, args.build_dir, args.round, args.input_dir, args.seed, threads,
                            options=wait_options(getattr(args, "cpu_wait_policy", None)))
        console.print("\n".join(escape(line) for line in benchmark_lines(r)))
        data["benchmark"] = r.to_dict()
    with thread_limit(threads):
        session = open_model(config, model, args.build_dir, args.input_dir, args.seed,
                             options=wait_options(getattr(args, "cpu_wait_policy", None)))
        if args.report:
            rep = online_report(session.engine, session.inputs, args.round, model.name, session.subgraph.runtime)
            console.print(escape(render_text(rep)))
            data["report"] = plain(rep)
        if args.dump_tensors:
            out = Path(args.dump_tensors) / model.name
            dumped = dump_tensors(session.engine, session.inputs, out)
            console.print(f"{len(dumped)} tensors of {model.name} written to {escape(str(out))}/ (tensors.csv)")
        select = layer_slice(args.layers)
        if args.gpu_out_of_range_check:
            failures += _range_check(console, session, data)
        if args.validate_all_layers or select is not None or \
                (args.validate and session.subgraph.values.get("check_tensors")):
            v = validate_layers(session, max(threads, 0), all_layers=args.validate_all_layers or select is not None,
                                csv_path=session.artifact("_layers.csv"), select=select)
            print_layers(console, v)
            data["layers"] = plain(v)
            if not v.checks:
                failures.append(f"no tensor of {model.name} compared: {v.why_nothing()}")
            elif v.first_failure is not None:
                failures.append(f"layer '{v.first_failure.tensor}' of {model.name}")
    if args.locate_divergence:
        rep = locate(config, model, args)
        data["divergence"] = plain(rep)
        failures += report_findings(console, rep)
    return failures


def _range_check(console, session, data: dict) -> list:
    """--gpu_out_of_range_check: print what was found; a failure message per bad tensor."""
    r = check_ranges(session.engine, session.inputs, session.model.name, session.subgraph.data_type)
    data["range_check"] = plain(r)
    what = "NaN/Inf" + (" and fp16 range" if r.half_storage else "")
    if not r.findings:
        console.print(f"Range check of {r.model}: {r.checked} float tensors, no {what} problem")
        return []
    for f in r.findings:
        console.print(f"[red]out of range:[/red] {r.model}: node {f.index} {escape(f.op)} ({f.type}), "
                      f"tensor {escape(f.tensor)}: {f.problem}")
    if r.hint:
        console.print(escape(r.hint))
    return [f"{RANGE} tensor '{f.tensor}' of {r.model}: {f.problem}" for f in r.findings]


def _merge_json(path: Path, extra: dict) -> None:
    """Add each model's report data to the JSON `run --json` wrote."""
    doc = json.loads(path.read_text())
    for entry in doc.get("models", []):
        entry.update(extra.get(entry.get("model"), {}))
    path.write_text(json.dumps(doc, indent=2, allow_nan=False))
