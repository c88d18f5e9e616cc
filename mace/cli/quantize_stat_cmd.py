"""`quantize_stat`: reduce `run --quantize_stat` logs to range files (also tools/quantize_stat.py).

    converter.py quantize_stat --config=deploy.yml [--log_file LOG] [--percentile P]
                               [--enhance [--enhance_ratio R]] [--output FILE]

Per model: reads the log `run --quantize_stat` wrote (default
builds/<library>/quantize_stat/<model>_tensor_range.log), writes the range file
(default: the same folder, <model>_overall_range.txt) and says which .yml keys
use it. tools/quantize_stat.py is MACE's form: one log in, range lines on stdout.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mace.cli._help import HelpFormatter
from mace.config import load_deployment
from mace.config.files import library_dir, models_of
from mace.errors import ConfigError, MaceError
from mace.quantize.ranges import format_ranges
from mace.quantize.stat import DEFAULT_ENHANCE_RATIO, parse_log, reduce_stats

HELP = "reduce `run --quantize_stat` logs to quantize range files (percentile, --enhance)"
STAT_DIR = "quantize_stat"


def stat_dir(config, build_dir=None) -> Path:
    return library_dir(config, build_dir) / STAT_DIR


def default_log(config, model: str, build_dir=None) -> Path:
    return stat_dir(config, build_dir) / f"{model}_tensor_range.log"


def default_range_file(config, model: str, build_dir=None) -> Path:
    return stat_dir(config, build_dir) / f"{model}_overall_range.txt"


def add_reduce_arguments(p) -> None:
    """The reduction flags, shared with tools/quantize_stat.py."""
    p.add_argument("--percentile", type=float, default=0.0,
                   help="percent of samples dropped at each end per tensor (lowest minima, highest "
                        "maxima); 0 keeps the overall range")
    p.add_argument("--enhance", action="store_true",
                   help="also trim long tails: a sample whose extreme jumps more than --enhance_ratio "
                        "times the mean step of the others is dropped (docs/quantization.md)")
    p.add_argument("--enhance_ratio", type=float, default=DEFAULT_ENHANCE_RATIO,
                   help="the jump that counts as a long tail, in mean steps (with --enhance)")


def add_arguments(p) -> None:
    p.add_argument("--log_file", default=None, metavar="LOG",
                   help="the log of `run --quantize_stat` (default: "
                        "builds/<library>/quantize_stat/<model>_tensor_range.log)")
    add_reduce_arguments(p)
    p.add_argument("--output", default=None, metavar="FILE",
                   help="range file to write (default: builds/<library>/quantize_stat/"
                        "<model>_overall_range.txt)")


def reduce_file(log_file, args) -> tuple:
    """(range file text, [TensorRange]) for one log."""
    ranges = reduce_stats(parse_log(log_file), args.percentile, args.enhance, args.enhance_ratio)
    return format_ranges({r.tensor: (r.min, r.max) for r in ranges}), ranges


def summary(ranges: list) -> str:
    trimmed = [r for r in ranges if r.trimmed]
    samples = max((r.samples for r in ranges), default=0)
    text = f"{len(ranges)} tensors over {samples} sample(s)"
    if trimmed:
        text += f"; --enhance trimmed a long tail of {len(trimmed)}: " + ", ".join(
            f"{r.tensor} [{r.observed_min:.6g}, {r.observed_max:.6g}] -> [{r.min:.6g}, {r.max:.6g}]"
            for r in trimmed[:5]) + (" ..." if len(trimmed) > 5 else "")
    return text


def main(args) -> int:
    config = load_deployment(args.config)
    models = models_of(config, args.models)
    if (args.log_file or args.output) and len(models) > 1:
        raise ConfigError(f"{config.path} has {len(models)} models: name one with --model_name when "
                          f"giving --log_file or --output")
    for model in models:
        log = Path(args.log_file) if args.log_file else default_log(config, model.name, args.build_dir)
        text, ranges = reduce_file(log, args)
        out = Path(args.output) if args.output else default_range_file(config, model.name, args.build_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"{model.name}: {summary(ranges)}")
        print(f"{model.name}: range file written to {out}; to quantize with it, set in the .yml "
              f"(model or subgraph): quantize: 1 and quantize_range_file: {out}")
    return 0


# ---- tools/quantize_stat.py --------------------------------------------------------------
def tool_main(argv=None) -> int:
    """MACE's quantize_stat.py: range lines on stdout (or --output), the summary on stderr."""
    p = argparse.ArgumentParser(prog="quantize_stat.py", description="Reduce a `run --quantize_stat` log to "
                                "a quantize range file (docs/quantization.md).",
                                formatter_class=HelpFormatter)
    p.add_argument("--log_file", required=True, metavar="LOG", help="the log of `run --quantize_stat`")
    add_reduce_arguments(p)
    p.add_argument("--output", default=None, metavar="FILE", help="write the range file here, not stdout")
    args = p.parse_args(argv)
    try:
        text, ranges = reduce_file(args.log_file, args)
        if args.output:
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            Path(args.output).write_text(text)
        else:
            sys.stdout.write(text)
    except MaceError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(summary(ranges) + (f"; written to {args.output}" if args.output else ""), file=sys.stderr)
    return 0
