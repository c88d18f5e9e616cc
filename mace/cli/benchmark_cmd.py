"""`benchmark`: MACE's model benchmark tables for every converted model (also `run --benchmark`)."""
from __future__ import annotations

import sys

from mace.cli._tables import grouped, mace_table, ms, shape
from mace.config import load_deployment
from mace.report.benchmark import benchmark_model
from mace.report.jsonutil import dumps
from mace.report.session import models_of

HELP = "benchmark converted models: per-op statistics (run order, slowest ops, by op type, MACs)"

ROUND_HEADERS = ["round", "first(ms)", "curr(ms)", "min(ms)", "max(ms)", "avg(ms)", "std"]
OP_HEADERS = ["Op Type", "Start", "First", "Avg(ms)", "%", "cdf%", "GMACPS", "Stride", "Pad",
              "Filter Shape", "Output Shape", "Dilation", "name"]


def add_arguments(p) -> None:
    p.add_argument("--round", type=int, default=10, help="runs without and with statistics (each)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs before timing")
    add_common(p)


def add_common(p) -> None:
    """Flags `run` shares (it has --round, --input_dir, --seed, --omp_num_threads of its own)."""
    p.add_argument("--input_dir", default=None, metavar="DIR",
                   help="read each input from DIR/<input name>.npy ('/', ':' in names become '_')")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--omp_num_threads", "--num_threads", dest="num_threads", type=int, default=-1,
                   help="CPU threads for BLAS; -1: library default")
    p.add_argument("--json", dest="json_path", default=None, metavar="PATH",
                   help="write every table's data as JSON")


def _round_rows(stats) -> list:
    return [[stats.round, ms(stats.first), ms(stats.curr), ms(stats.min), ms(stats.max), ms(stats.avg),
             ms(stats.std)]]


def _op_rows(ops) -> list:
    return [[o.type, ms(o.start), ms(o.first), ms(o.avg), ms(o.percent), ms(o.cdf), ms(o.gmacps),
             shape(o.stride), o.pad, shape(o.filter_shape), shape(o.output_shape), shape(o.dilation), o.name]
            for o in ops]


def benchmark_lines(r) -> list:
    """The eight sections of MACE's benchmark output for one BenchmarkResult."""
    lines = [f"Benchmark model {r.model} ({r.runtime})", ""]
    lines += mace_table("Warm Up", ROUND_HEADERS, _round_rows(r.warm_up)) + [""]
    lines += mace_table("Run without statistics", ROUND_HEADERS, _round_rows(r.run_without_statistics)) + [""]
    lines += mace_table("Run with statistics", ROUND_HEADERS, _round_rows(r.run_with_statistics)) + [""]
    lines += mace_table("Sort by Run Order", OP_HEADERS, _op_rows(r.run_order)) + [""]
    lines += mace_table("Sort by Computation Time", OP_HEADERS, _op_rows(r.by_computation_time(10))) + [""]
    lines += mace_table("Stat by Op Type", ["Op Type", "Count", "Avg(ms)", "%", "cdf%", "MACs", "GMACPS",
                                            "Called times"],
                        [[t.type, t.count, ms(t.avg), ms(t.percent), ms(t.cdf), grouped(t.macs), ms(t.gmacps),
                          t.called_times] for t in r.by_op_type]) + [""]
    m = r.macs
    lines += mace_table("Stat by MACs(Multiply-Accumulation)", ["total", "round", "first(G/s)", "avg(G/s)", "std"],
                        [[grouped(m.total), m.round, ms(m.first), ms(m.avg), ms(m.std)]])
    lines += mace_table("Summary of Ops' Stat", ROUND_HEADERS, _round_rows(r.ops_summary))
    return lines


def main(args) -> int:
    config = load_deployment(args.config)
    for w in config.warnings:
        print(f"warning: {config.path}: {w}", file=sys.stderr)
    results = []
    for model in models_of(config, args.models):
        r = benchmark_model(config, model, args.build_dir, args.round, args.input_dir, args.seed,
                            args.num_threads, warmup=args.warmup)
        print("\n".join(benchmark_lines(r)))
        results.append(r)
    if args.json_path:
        with open(args.json_path, "w") as f:
            f.write(dumps({"library": config.library_name, "models": [r.to_dict() for r in results]}))
    return 0
