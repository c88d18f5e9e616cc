"""The quantization flags of `run`: --quantize_stat (+ --quantize_stat_log) and --trace_dir.

--quantize_stat runs the converted float model over every sample of --input_dir and
logs MACE's `Tensor range @@<tensor>@@<min>,<max>` lines (stdout and a log file) for
`quantize_stat` / tools/quantize_stat.py; it replaces the normal run. --trace_dir
dumps every node output of a quantized model and compares each layer with the float
model (mace/validate/trace.py). docs/quantization.md has the whole flow.
"""
from __future__ import annotations

import copy
import sys
import tempfile
from pathlib import Path

import numpy as np

from rich.markup import escape
from rich.table import Table

from mace.cli._cluster import cluster_of
from mace.cli._progress import sample_bar
from mace.cli.quantize_stat_cmd import default_log
from mace.config.files import MAP_SUFFIX, models_of
from mace.config.hints import command_hint
from mace.errors import ConfigError
from mace.quantize.calibrate import load_samples
from mace.quantize.stat import log_lines, stat_config, stat_engine
from mace.report.dump import capture_outputs
from mace.report.session import open_model
from mace.runtime.affinity import thread_limit
from mace.runtime.engine import create_engine, is_quantized
from mace.scale import stat as sharded_stat
from mace.scale.runner import session
from mace.validate.trace import to_obfuscated, trace_model

SAMPLES_HELP = "one sub-folder per sample holding <input>.npy, *.npz files keyed by input name, or " \
               "*.npy files for a one-input model (JPEG/PNG files where the input has image_preprocess)"


def add_arguments(p) -> None:
    p.add_argument("--quantize_stat", action="store_true",
                   help="run the float model over every sample in --input_dir and log each tensor's "
                        "range per sample (MACE's `Tensor range @@` lines) for `quantize_stat`; "
                        "convert with --quantize_stat first")
    p.add_argument("--quantize_stat_log", default=None, metavar="FILE",
                   help="where --quantize_stat writes its log ({model} is replaced by the model name; "
                        "default: builds/<library>/quantize_stat/<model>_tensor_range.log)")
    p.add_argument("--trace_dir", default=None, metavar="DIR",
                   help="quantized models: write every node output to DIR/<model>/ (uint8 .npy, "
                        "dequantized .dequant.npy, scale/zero point in trace.csv) and compare each layer "
                        "with the float model")


def _log_path(args, config, model: str, several: bool) -> Path:
    if not args.quantize_stat_log:
        return default_log(config, model, args.build_dir)
    if several and "{model}" not in args.quantize_stat_log:
        raise ConfigError("--quantize_stat_log: several models would share one log; put {model} in the "
                          "path or pick one with --model_name")
    return Path(args.quantize_stat_log.replace("{model}", model))


def run_stat(args, config, console) -> int:
    """`run --quantize_stat`: the whole command (no timing run, no validation)."""
    if not args.input_dir:
        raise ConfigError(f"--quantize_stat needs --input_dir DIR with sample inputs ({SAMPLES_HELP})")
    models = models_of(config, args.models)
    cluster = cluster_of(args)   # --cluster ray: the samples sharded over Ray workers
    for note in cluster.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    with session(cluster, notify=lambda note: console.print(f"[yellow]note:[/yellow] {escape(note)}")):
        for model in models:
            _stat_model(args, config, console, model, cluster, len(models) > 1)
    return 0


def _stat_model(args, config, console, model, cluster, several: bool) -> None:
    stat_engine(config, model, args.build_dir)   # a clear error before any worker starts
    samples = load_samples(args.input_dir, model.graph.inputs, "--input_dir", model.graph.image_preprocess)
    with sample_bar(console, f"ranges of {model.name} ({cluster.describe})") as bar:
        task = bar.add_task("samples", total=len(samples))
        per_sample = sharded_stat.collect(config, model, args.build_dir, samples, cluster, args.num_threads,
                                          progress=lambda n, total: bar.update(task, completed=n),
                                          notify=lambda note: console.print(f"[yellow]note:[/yellow] "
                                                                            f"{escape(note)}"))
    lines = log_lines(per_sample)
    path = _log_path(args, config, model.name, several)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()
    console.print(f"{model.name}: ranges of {len(per_sample[0])} tensors over {len(samples)} sample(s) "
                  f"written to {escape(str(path))}")
    nxt = command_hint("quantize_stat", config, args.build_dir, f"--model_name={model.name}", f"--log_file={path}")
    console.print(f"next: run `{escape(nxt)}`")


def trace(args, config, console) -> None:
    """`run --trace_dir`: trace every model (quantized ones only)."""
    if not args.trace_dir:
        return

    for model in models_of(config, args.models):
        with thread_limit(args.num_threads):
            session = open_model(config, model, args.build_dir, args.input_dir, args.seed)
            if not is_quantized(session.engine.graph):
                raise ConfigError(f"--trace_dir: model '{model.name}' is not quantized (convert it with "
                                  f"quantize: 1); --dump_tensors writes a float model's tensors")
            reference = float_reference(config, model, session.inputs, args.build_dir)
            if session.artifact(MAP_SUFFIX).exists():  # obfuscate: 1 built it with opaque names
                reference = to_obfuscated(reference, session.artifact(MAP_SUFFIX))
            t = trace_model(session.engine, session.inputs, Path(args.trace_dir) / model.name, reference,
                            session.subgraph.threshold(), model.name)
        print_trace(console, t)


def _f(v, fmt="{:.4f}") -> str:
    return "-" if v is None else fmt.format(v)


def print_trace(console, t) -> None:
    table = Table(title=f"Quantized {t.model} against the float model, layer by layer")
    for col in ("#", "op", "type", "tensor", "scale", "zp", "cosine", "SQNR(dB)", "drop(dB)", "max err",
                "steps", "clipped"):
        table.add_column(col)
    first, worst = t.first_below_threshold, t.largest_drop
    for r in t.rows:
        mark = " [red]<- first below threshold[/red]" if r is first else ""
        mark += " [yellow]<- largest drop[/yellow]" if r is worst else ""
        table.add_row(str(r.index), escape(r.op) + mark, r.type, escape(r.tensor), _f(r.scale, "{:.4g}"),
                      _f(r.zero_point, "{}"), _f(r.cosine), _f(r.sqnr_db, "{:.1f}"), _f(r.sqnr_drop_db, "{:.1f}"),
                      _f(r.max_abs_error, "{:.3g}"), _f(r.max_error_steps, "{:.1f}"),
                      _f(r.clipped, "{:.1%}"))
    console.print(table)
    if first:
        console.print(f"first layer below cosine {t.threshold}: {escape(first.op)} ({first.type}), "
                      f"cosine {first.cosine:.4f}")
    if worst:
        console.print(f"largest SQNR drop: {escape(worst.op)} ({worst.type}), {worst.sqnr_drop_db:.1f} dB")
    console.print(f"{len(t.rows)} tensors of {t.model} traced to {escape(str(t.directory))}/ (trace.csv)")


def float_reference(config, model, inputs: dict, build_dir=None) -> dict:
    """The float model's value of every node output on `inputs`: the deployment file's model
    converted again with quantize off (as `convert --quantize_stat`) into a temporary folder."""
    from mace.convert import convert_model   # start-up: the frontends load only for --trace_dir

    float_config = copy.deepcopy(config)
    stat_config(float_config, force=True)
    with tempfile.TemporaryDirectory(prefix="mace_trace_") as tmp:
        result = convert_model(float_config, float_config.models[model.name], Path(tmp), build_dir)
        engine = create_engine(result.pb_path, result.data_path, device="cpu")
        _, values = capture_outputs(engine, inputs)
    return {**{name: np.asarray(v) for name, v in inputs.items()}, **values}  # inputs: for their Quantize
