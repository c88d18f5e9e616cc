"""`convert`: every model of the deployment file -> builds/<library>/model/<model>.pb + .data."""
from __future__ import annotations

import sys

from mace.cli import _overrides
from mace.cli._console import console as make_console
from rich.markup import escape
from rich.table import Table

from mace.config import load_deployment
from mace.config.files import code_names
from mace.convert import convert_deployment, index_html
from mace.quantize.mixed_precision import STEP as MIXED_STEP
from mace.quantize.stat import stat_config
from mace.report.offline import render_text

HELP = "convert the models of a deployment file into the IR (.pb + .data, and MACE's <model>_index.html)"
EPILOG = ("quantize_target_cosine: X in the .yml (with quantize: 1 or runtime: dsp, and calibration "
          "samples) keeps the fewest layers float until the quantized outputs' cosine on the "
          "calibration samples reaches X; convert prints how many, <model>_quantize_report.txt lists "
          "them with their SQNR drops, and on runtime dsp they run on the CPU, the rest on the DSP "
          "(docs/quantization.md).")


def add_arguments(p) -> None:
    p.add_argument("--dump_passes", default=None, metavar="DIR",
                   help="write the IR after every transformer pass as text to DIR/<model>/NN_<pass>.pbtxt")
    p.add_argument("--report", action="store_true",
                   help="print each model's offline report (always written to <model>_report.txt)")
    p.add_argument("--quantize_stat", action="store_true",
                   help="convert float for `run --quantize_stat` even if the .yml says quantize: 1 "
                        "(runtime cpu, obfuscate off; as the .yml key quantize_stat: 1)")


def main(args) -> int:
    config = load_deployment(args.config)
    _overrides.apply(config, args)  # MACE's --target_abis, --model_graph_format, ...
    console = make_console()
    for w in config.warnings:
        print(f"warning: {config.path}: {w}", file=sys.stderr)
    if stat_config(config, args.quantize_stat):
        console.print("converting float for quantize statistics (quantize and obfuscate off, runtime cpu)")
    with console.status("converting") as status:   # long steps (gpu_fp32_ops: auto) say where they are
        def progress(text):
            status.update(escape(text))
            if MIXED_STEP in text:   # quantize_target_cosine's steps stay on the screen, one line each
                console.print(escape(text))

        results = convert_deployment(config, args.build_dir, args.models, args.dump_passes, progress)
    table = Table(title=f"Library {escape(config.library_name)}")
    for col in ("model", "ops", "weights", "graph file", "data file"):
        table.add_column(col)
    for r in results:
        if args.vlog_level:
            for line in r.log:
                console.print(f"  {r.model}: {escape(line)}")
        for note in r.notes:
            console.print(f"[yellow]note:[/yellow] {r.model}: {escape(note)}")
        table.add_row(r.model, str(r.op_count), f"{r.data_bytes / 1024:.1f} KiB", escape(str(r.pb_path)),
                      escape(str(r.data_path)))
        console.print(f"Model {r.model} converted")
        html = index_html(r)
        if html:
            console.print(f"Store to html file: {escape(str(html))}")
        if r.mixed is not None:
            console.print(escape(mixed_summary(r.model, r.mixed)))
    console.print(table)
    if code_names(config):
        console.print(escape(code_names(config)))
    if args.report:
        for r in results:
            console.print(escape(render_text(r.report)))
    if args.dump_passes:
        console.print(f"IR after each pass written to {escape(args.dump_passes)}/")
    return 0


def mixed_summary(model: str, m) -> str:
    """One line: what quantize_target_cosine's search kept float, and where it runs."""
    kept = ", ".join(name for name, _, _ in m.float_ops) or "none"
    where = (f"; runtime dsp: {len(m.cpu_ops)} float op(s) on the CPU ({', '.join(m.cpu_ops)}), "
             f"the rest on the DSP" if m.cpu_ops else "")
    verdict = "target met" if m.reached else \
        f"TARGET NOT MET ({f'stopped by {m.stopped}' if m.stopped else 'every quantizable op tried'})"
    cost = f" ({len(m.trials)} quantized run(s), {m.seconds:.0f} s)" if m.trials else ""
    return (f"  {model}: mixed precision (quantize_target_cosine {m.target:g}): {len(m.float_ops)} op(s) "
            f"kept float ({kept}); calibration cosine {m.steps[0]:.4f} -> {m.steps[-1]:.4f}, {verdict}"
            f"{cost}{where}; see {model}_quantize_report.txt")
