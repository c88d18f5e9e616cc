"""`benchmark`: MACE's model benchmark tables for every converted model (also `run --benchmark`),
on this machine or on the devices `run` would use (the device measures with the same
mace.report.benchmark code and sends its BenchmarkResult back; see docs/devices.md)."""
from __future__ import annotations

import sys

from mace.cli import _overrides, _devices, _dsp_flags
from mace.cli._console import console as make_console
from mace.cli._cpu_flags import add_wait_policy
from mace.cli._run_options import run_options
from mace.cli._tables import grouped, mace_table, ms, shape
from mace.config import load_deployment
from mace.config.files import models_of
from mace.devices.target_run import BenchmarkRun
from mace.errors import ConfigError
from mace.report.benchmark_model import benchmark_model
from mace.runtime.affinity import pin_threads, wait_options
from mace.transform.placement.timing import placement_lines
from mace.util.jsonutil import dumps

HELP = "benchmark converted models: per-op statistics (run order, slowest ops, by op type, MACs)"

ROUND_HEADERS = ["round", "first(ms)", "curr(ms)", "min(ms)", "max(ms)", "avg(ms)", "std"]
OP_HEADERS = ["Op Type", "Start", "First", "Avg(ms)", "%", "cdf%", "GMACPS", "Stride", "Pad",
              "Filter Shape", "Output Shape", "Dilation", "name"]


def add_arguments(p) -> None:
    p.add_argument("--round", type=int, default=10, help="runs without and with statistics (each)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs before timing")
    p.add_argument("--max_num_runs", type=int, default=None, metavar="N",
                   help="MACE's spelling of --round (when both are given, this one counts)")
    p.add_argument("--max_seconds", type=float, default=None, metavar="S",
                   help="MACE's flag: stop each timed phase once it has run S seconds (at least one run; "
                        "host runs)")
    p.add_argument("--cpu_affinity_policy", type=int, default=0, choices=range(5), metavar="{0..4}",
                   help="pin the CPU threads (MACE's CPUAffinityPolicy): 0 none, 1 big cores, "
                        "2 little cores, 3 high performance, 4 power save; on a device too")
    add_wait_policy(p)
    add_common(p)
    _dsp_flags.add_arguments(p)
    _devices.add_arguments(p)


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


def benchmark_lines(r, where: str = "") -> list:
    """The eight sections of MACE's benchmark output for one BenchmarkResult; `where` names
    the device it was measured on (nothing: this machine)."""
    lines = [f"Benchmark model {r.model} ({r.runtime})" + (f" on {where}" if where else ""), ""]
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
    if r.groups:  # several runtimes: time per placement group and per transfer (docs/placement.md)
        lines += [""] + placement_lines(r, mace_table, ms)
    if r.estimated:  # runtime dsp: the backend's per-op cycles beside the host time of the simulation
        lines += [""] + dsp_cost_lines(r)
    return lines


DSP_HEADERS = ["Op Type", "Est.Cycles", "Est.Time(us)", "Compute", "Load/Store", "Dispatch", "MACs",
               "Bytes", "Host Avg(ms)", "name"]


def dsp_cost_lines(r) -> list:
    """Per-op cycles a DSP backend reports (the simulator: estimated, docs/dsp.md)."""
    host = {o.index: o.avg for o in r.run_order}
    rows = [[c.type, grouped(c.cycles), ms(1000.0 * c.time_ms), grouped(c.compute_cycles), grouped(c.memory_cycles),
             grouped(c.dispatch_cycles), grouped(c.macs), grouped(c.bytes_moved),
             ms(host[c.index]) if c.index in host else "", c.name] for c in r.estimated]
    total = sum(c.cycles for c in r.estimated)
    rows.append(["total", grouped(total), ms(1000.0 * sum(c.time_ms for c in r.estimated)), "", "", "", "", "",
                 ms(sum(host.values())), ""])
    return mace_table("DSP Estimated Cycles by Run Order", DSP_HEADERS, rows)


def _host_runs(config, args) -> list:
    notes = []
    if args.cpu_affinity_policy and not pin_threads(args.cpu_affinity_policy, args.num_threads):
        notes.append(f"cpu_affinity_policy {args.cpu_affinity_policy}: this OS does not let us pin threads")
    runs = []
    for model in models_of(config, args.models):
        r = benchmark_model(config, model, args.build_dir, args.round, args.input_dir, args.seed,
                            args.num_threads, warmup=args.warmup, max_seconds=args.max_seconds,
                            options=wait_options(args.cpu_wait_policy))
        runs.append(BenchmarkRun(model.name, r, notes=list(notes)))
    return runs


def _where(run: BenchmarkRun) -> str:
    """'' on this machine; else `device board (ssh u@h:22, ABI arm64, SoC rk3399, aarch64)`."""
    if run.device == "host":
        return ""
    info = run.device_info
    soc = f", SoC {info['soc']}" if info.get("soc") else ""
    return f"device {run.device} ({info['address']}, ABI {info['abi']}{soc}, {info['machine']})"


def _json(run: BenchmarkRun) -> dict:
    return {**run.result.to_dict(), "device": run.device, "device_info": run.device_info or None,
            "notes": run.notes, "init_ms": run.init_ms}


def main(args) -> int:
    config = load_deployment(args.config)
    _overrides.apply(config, args)  # MACE's --target_abis, --model_graph_format, ...
    _dsp_flags.apply(config, args)
    if args.max_num_runs is not None:
        args.round = args.max_num_runs
    if args.max_seconds is not None and args.max_seconds <= 0:
        raise ConfigError(f"--max_seconds {args.max_seconds}: must be above 0")
    for w in config.warnings:
        print(f"warning: {config.path}: {w}", file=sys.stderr)
    runs, device_errors = _devices.run(config, args, lambda _host: _host_runs(config, args), make_console(),
                                       run_options(args, config, benchmark=True, warmup=args.warmup))
    for run in runs:
        for note in run.notes:
            print(f"note: {note}")
        print("\n".join(benchmark_lines(run.result, _where(run))))
    if args.json_path:
        with open(args.json_path, "w") as f:
            f.write(dumps({"library": config.library_name, "models": [_json(r) for r in runs]}))
    _devices.raise_errors(device_errors)
    return 0
