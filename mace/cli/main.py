"""Entry point: parse flags, load the deployment file, call the library, print results.

Errors meant for users (MaceError) print one line and exit non-zero without a
traceback; `--verbose` shows the traceback of anything.
"""
from __future__ import annotations

import argparse
import logging
import shlex
import sys

from mace import __version__
from mace.cli import (_help, _overrides, benchmark_cmd, build_cmd, config_cmd, convert_cmd, debug_cmd, mace_flags,
                      quantize_stat_cmd, report_cmd, run_cmd, sweep_cmd, visualize_cmd, warmup_cmd)
from mace.cli._compile_notice import compile_notice
from mace.errors import MaceError
from mace.util.invocation import converter_command

COMMANDS = {"convert": convert_cmd, "build": build_cmd, "run": run_cmd, "config": config_cmd,
            "benchmark": benchmark_cmd, "report": report_cmd, "visualize": visualize_cmd, "debug": debug_cmd,
            "quantize_stat": quantize_stat_cmd, "sweep": sweep_cmd, "warmup": warmup_cmd}

EPILOG = """examples:
  python tools/converter.py convert --config=examples/digits/digits.yml
  python tools/converter.py run --config=examples/digits/digits.yml --validate
  python tools/converter.py run --config=examples/digits/digits.yml --round=100
  python tools/converter.py config --config=examples/digits/digits.yml
  python tools/converter.py benchmark --config=examples/digits/digits.yml --round=100
  python tools/converter.py visualize --config=examples/digits/digits.yml
  python tools/converter.py debug --config=examples/digits/digits.yml
  python tools/converter.py warmup      # compile the CPU kernels for this machine, once
  python tools/converter.py warmup --aot   # also into one library: one-thread runs with MACE_AOT=1 need no numba
  python tools/converter.py sweep --config=a.yml --config=b.yml --runtimes=cpu,quantized --devices=all
  python tools/converter.py build --config=deploy.yml && \
    python tools/converter.py run --config=deploy.yml --device_yml=devices.yml --validate
"""


def common_flags(several_configs: bool | None = False) -> argparse.ArgumentParser:
    """The flags every command takes; several_configs None: a command without a deployment file."""
    p = argparse.ArgumentParser(add_help=False)
    if several_configs is None:
        p.add_argument("--verbose", action="store_true", help="show tracebacks")
        p.add_argument("--vlog_level", type=int, default=0, help="verbosity: 0 results only, 1 more")
        return p
    if several_configs:   # sweep: one or more deployment files
        p.add_argument("--config", required=True, action="append", help="deployment .yml (repeatable)")
    else:
        p.add_argument("--config", required=True, help="deployment .yml (MACE schema)")
    p.add_argument("--build_dir", default="builds",
                   help="where builds/<library_name>/ goes")
    p.add_argument("--model_name", "--models", dest="models", action="append", default=None,
                   help="only this model (repeatable; default: every model in the file)")
    p.add_argument("--vlog_level", type=int, default=0,
                   help="verbosity: 0 results only, 1 passes and timings, 2 per-op detail")
    p.add_argument("--verbose", action="store_true", help="show tracebacks")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_help.prog_name(), description="Convert, run and validate models described by a MACE-style "
                                         "deployment file.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parents = {False: common_flags(), True: common_flags(several_configs=True), None: common_flags(None)}
    for name, module in COMMANDS.items():
        kind = None if getattr(module, "NO_CONFIG", False) else getattr(module, "MULTI_CONFIG", False)
        parent = parents[kind]
        p = sub.add_parser(name, parents=[parent], help=module.HELP, description=module.HELP,
                           epilog=getattr(module, "EPILOG", None),
                           formatter_class=_help.HelpFormatter)
        module.add_arguments(p)
        if name in mace_flags.COMMANDS:  # MACE's flags: mapped, or accepted with a note
            _overrides.add_arguments(p, name)
            mace_flags.install(p, name)
        p.set_defaults(handler=module.main)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.vlog_level else logging.WARNING,
                        format="%(message)s")
    for note in mace_flags.notes_given(args, args.command):
        print(f"note: {note}", file=sys.stderr)
    try:
        if args.command == "warmup":   # it shows its own progress
            return args.handler(args) or 0
        with compile_notice():   # a first run's kernel compiles are announced, never silent
            return args.handler(args) or 0
    except MaceError as e:
        if args.verbose:
            raise
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug of ours: say so, briefly
        if args.verbose:
            raise
        again = f"{converter_command()} {shlex.join([*(sys.argv[1:] if argv is None else argv), '--verbose'])}"
        print(f"internal error: {type(e).__name__}: {e}\n(run `{again}` for the traceback, "
              f"and please report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
