"""`run`: run converted models (timings, outputs) and optionally validate them."""
from __future__ import annotations

import json
import math
import sys

import numpy as np
from mace.cli import _accuracy, _cluster, _overrides, _devices, _dsp_flags, _gpu_flags, _quant_flags, run_extras
from mace.cli._console import console as make_console
from mace.cli._cpu_flags import add_wait_policy
from mace.cli._run_options import run_options
from rich.markup import escape
from rich.table import Table

from mace.config import load_deployment, schema
from mace.config.files import library_dir, models_of
from mace.errors import ConfigError, ValidationFailed
from mace.report.run_csv import write_report_csv
from mace.run import run_deployment

HELP = "run converted models; --validate compares with the original framework"


def add_arguments(p) -> None:
    p.add_argument("--validate", action="store_true",
                   help="compare outputs with the original framework (cosine, SQNR, pixel accuracy); "
                        "ONNX models with backend tensorflow|keras|tflite and original_model_file_path "
                        "against that original")
    p.add_argument("--round", type=int, default=1, help="timed runs after the warm-up run")
    p.add_argument("--example", action="store_true",
                   help="run as an application would: load the model with the Python API and print "
                        "each output's shape and top-5 classes")
    p.add_argument("--input_dir", default=None, metavar="DIR",
                   help="read each input from DIR/<input name>.npy ('/', ':' in names become '_'), from "
                        "MACE's raw DIR/model_input_<name> (every non-alphanumeric character as '_'), or "
                        "from DIR/<input name>.jpg|.png for an input with image_preprocess")
    p.add_argument("--output_dir", default=None, metavar="DIR",
                   help="write each output to DIR/<output name>.npy ('/', ':' in names become '_'), or "
                        "as MACE's raw DIR/model_out_<name> with --output_format raw")
    p.add_argument("--output_format", default="npy", choices=("npy", "raw"),
                   help="--output_dir files: .npy, or raw little-endian bytes named as MACE names them")
    p.add_argument("--restart_round", type=int, default=1, metavar="N",
                   help="MACE's flag: create the engine and run --round times, N times over (host runs)")
    p.add_argument("--report_dir", default=None, metavar="DIR",
                   help="where --report appends MACE's report.csv when --round > 0 (default builds/<library>/)")
    p.add_argument("--omp_num_threads", "--num_threads", dest="num_threads", type=int, default=-1,
                   help="CPU threads for BLAS (and onnxruntime when validating); -1: library default")
    p.add_argument("--cpu_affinity_policy", type=int, default=0, choices=range(5), metavar="{0..4}",
                   help="pin the CPU threads (MACE's CPUAffinityPolicy): 0 none, 1 big cores, "
                        "2 little cores, 3 high performance, 4 power save")
    add_wait_policy(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the random validation inputs")
    p.add_argument("--input_shape", action="append", default=[], metavar="NAME=DIMS",
                   help="run (and --validate against the framework) at this input shape instead of the "
                        "converted one, e.g. data=4,3,224,224 (DIMS alone for a one-input model; repeat per "
                        "input): random inputs unless --input_dir; only dimensions the deployment file "
                        "declares variable (input_shapes: -1..8,...) may change")
    p.add_argument("--json", dest="json_path", default=None, metavar="PATH",
                   help="write metrics and timings as JSON")
    _devices.add_arguments(p)
    _gpu_flags.add_arguments(p)
    _dsp_flags.add_arguments(p)
    _quant_flags.add_arguments(p)
    _accuracy.add_arguments(p)
    _cluster.add_arguments(p)
    run_extras.add_arguments(p)


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6f}" if abs(x) < 1000 else f"{x:.1f}"


def _print_timing(console, r) -> None:
    t = r.timing
    table = Table(title=f"Run model {r.model} on {escape(r.device)} ({r.runtime})")
    for col in ("init(ms)", "warmup(ms)", "round", "run_avg(ms)", "median(ms)", "min(ms)", "max(ms)",
                "std(ms)"):
        table.add_column(col, justify="right")
    table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in
                    (t.init_ms, t.warmup_ms, t.rounds, t.avg_ms, t.median_ms, t.min_ms, t.max_ms, t.std_ms)))
    console.print(table)


def _print_ops(console, r) -> None:
    table = Table(title=f"Ops of {r.model} in run order (timed rounds)")
    for col in ("#", "op", "type", "kernel", "output shape", "avg(ms)"):
        table.add_column(col)
    for s in r.op_stats:
        table.add_row(str(s.index), escape(s.name), s.type, s.kernel, str(s.output_shape), f"{s.avg_ms:.4f}")
    console.print(table)


def _print_metrics(console, r) -> None:
    table = Table(title=f"Validate {r.model} against the original framework")
    for col in ("output", "cosine", "SQNR(dB)", "pixel_accuracy", "max_abs_err", "threshold", "result"):
        table.add_column(col)
    for m in r.metrics:
        table.add_row(escape(m.name), _fmt(m.cosine), _fmt(m.sqnr_db), f"{m.pixel_accuracy:.4f}",
                      f"{m.max_abs_error:.3g}", f"{m.threshold}",
                      "[green]PASS[/green]" if m.passed else "[red]FAIL[/red]")
    console.print(table)


def _print_example(console, r) -> None:
    for name, value in r.outputs.items():
        flat = np.asarray(value).reshape(-1)
        top = np.argsort(-flat)[:5]
        console.print(f"{escape(name)}: shape {list(value.shape)}, top-5 " +
                      ", ".join(f"{i}: {flat[i]:.4f}" for i in top))


def to_json(r) -> dict:
    return {"model": r.model, "device": r.device, "device_info": r.device_info or None,
            "runtime": r.runtime, "inputs": r.input_source,
            "timing": vars(r.timing), "notes": r.notes,
            "validation": [m.to_dict() for m in r.metrics] if r.metrics else None,
            "passed": r.passed if r.metrics else None}


def _report_csv(args, config, console, results) -> None:
    """MACE's report.csv, where its --report_dir puts it; as MACE, only for timed runs (--round > 0)."""
    if args.report_dir and not args.report:
        console.print("[yellow]note:[/yellow] --report_dir is where --report writes report.csv; "
                      "without --report nothing is written")
    if not (args.report and results):
        return
    if args.round < 1:
        console.print("[yellow]note:[/yellow] report.csv not written: --round 0 has no timed runs "
                      "(MACE writes it only when --round > 0)")
        return
    path = write_report_csv(args.report_dir or library_dir(config, args.build_dir), results)
    console.print(f"report CSV: {escape(str(path))}")


def parse_input_shapes(flags: list, config, models=None) -> dict:
    """{input: dims} of the --input_shape flags (NAME=DIMS, or DIMS for a one-input model)."""
    shapes = {}
    for text in flags:
        name, sep, dims = text.rpartition("=")
        if not sep:
            inputs = sorted({t for m in models_of(config, models) for t in m.graph.input_tensors})
            if len(inputs) != 1:
                raise ConfigError(f"--input_shape {text}: name the input (NAME=DIMS); inputs: {', '.join(inputs)}")
            name = inputs[0]
        try:
            shape = schema.parse_fixed_shapes(dims)[0]
        except (ValueError, IndexError):
            raise ConfigError(f"--input_shape {text}: expected NAME=comma-separated integers, "
                              f"e.g. data=4,3,224,224") from None
        if not shape or min(shape) < 1:
            raise ConfigError(f"--input_shape {text}: every dimension must be at least 1")
        shapes[name] = shape
    return shapes


def main(args) -> int:
    config = load_deployment(args.config)
    _overrides.apply(config, args)  # MACE's --target_abis, --model_graph_format, ...
    _dsp_flags.apply(config, args)
    console = make_console()
    for w in config.warnings:
        print(f"warning: {config.path}: {w}", file=sys.stderr)
    if args.restart_round < 1:
        raise ConfigError(f"--restart_round {args.restart_round}: must be at least 1")
    _cluster.cluster_of(args)   # --cluster, --ray_address / RAY_ADDRESS, --workers: refused before the run
    input_shapes = parse_input_shapes(args.input_shape, config, args.models)
    named = set(",".join(args.devices or []).split(",")) - {""}
    boards = named - {"host"} or (not named and any(a != "host" for a in config.target_abis))
    if input_shapes and boards:
        raise ConfigError("--input_shape: runs on this machine only in this release (boards run the "
                          "converted shapes); add --device host")
    if args.quantize_stat:  # MACE's statistics run over --input_dir: no timing, no validation
        return _quant_flags.run_stat(args, config, console)
    opts = run_options(args, config, input_shapes=input_shapes)   # this machine's run and the boards' alike
    results, device_errors = _devices.run(config, args, lambda host: run_deployment(config, args.models, opts=host),
                                          console, opts)
    for r in results:
        console.print(f"Run model {r.model}: inputs from {escape(r.input_source)}")
        for note in r.notes:
            console.print(f"[yellow]note:[/yellow] {escape(note)}")
        _print_timing(console, r)
        if r.op_stats:
            _print_ops(console, r)
        if args.example:
            _print_example(console, r)
        if r.metrics:
            _print_metrics(console, r)
    if args.output_dir:
        console.print(f"outputs written to {escape(args.output_dir)}/"
                      + (" (MACE's raw format)" if args.output_format == "raw" else ""))
    _report_csv(args, config, console, results)
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({"library": config.library_name, "models": [to_json(r) for r in results]}, f, indent=2)
    _devices.raise_errors(device_errors)
    layer_failures = run_extras.main(args, config, console)
    _accuracy.main(args, config, console)
    _quant_flags.trace(args, config, console)
    failed = [m.name for r in results for m in r.metrics if not m.passed]
    if failed:
        raise ValidationFailed(f"similarity below threshold for output(s): {', '.join(failed)}")
    if layer_failures:
        what = "layer-by-layer" if any(not f.startswith(run_extras.RANGE) for f in layer_failures) else "range"
        raise ValidationFailed(f"{what} check failed: {'; '.join(layer_failures)}")
    if args.validate:
        console.print("[green]Similarity test passed[/green]")
    return 0
