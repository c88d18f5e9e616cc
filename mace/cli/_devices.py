"""Device flags of `run` (and of `benchmark`, which reuses them), and running on what they choose.

With target_abis [host] and no --device, the host runs the models in this process, exactly as
`run` always did; boards (ssh) and phones (adb) are used when the deployment file's target_abis
or --device name them. See docs/devices.md.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from rich.markup import escape

from mace.config.files import models_of
from mace.devices.discovery import find_targets, split_names
from mace.devices.target_run import RunOptions, output_dir_for, run_on_targets
from mace.errors import MaceError


MAX_SECONDS = 7 * 24 * 3600   # a week: beyond it (1e308, inf) the OS's timers overflow


def seconds(text: str) -> float:
    """A timeout flag's value: a finite number of seconds in (0, MAX_SECONDS]; nan is refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < value <= MAX_SECONDS:   # also False for nan
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {MAX_SECONDS}], got {text!r}")
    return value


def add_arguments(p) -> None:
    g = p.add_argument_group("devices (see docs/devices.md)")
    g.add_argument("--device_yml", default=None, metavar="PATH",
                   help="devices .yml in MACE's schema (default: ./devices.yml when present)")
    g.add_argument("--device", "--devices_to_run", dest="devices", action="append", default=None,
                   metavar="NAME", help="run only on this device: a name from the devices .yml, an adb "
                                        "serial or model, or host (repeatable, or comma-separated)")
    g.add_argument("--target_socs", default=None, metavar="SOCS",
                   help="only devices with one of these SoCs (comma-separated), 'all', or 'random' "
                        "(one idle device); default: the deployment file's target_socs")
    g.add_argument("--device_timeout", type=seconds, default=300.0, metavar="S",
                   help="seconds each step on a device may take (connect, push, run, pull); "
                        f"more than 0, at most {MAX_SECONDS}")
    g.add_argument("--device_lock_timeout", type=seconds, default=3600.0, metavar="S",
                   help="seconds to wait while another run uses a device")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(config, args, run_host, console, opts: RunOptions) -> tuple:
    """Run on the chosen targets as `opts` says (mace/cli/_run_options.py makes it from the flags);
    `run_host(opts)` runs on this machine (mace.run), with the host's output folder.
    Returns (results, device errors): the caller prints the results, then raise_errors()."""
    known_hosts = Path(args.build_dir).resolve() / "known_hosts"
    socs = [s.strip() for s in args.target_socs.split(",") if s.strip()] if args.target_socs else None
    found = find_targets(config, args.device_yml, split_names(args.devices), socs, known_hosts,
                         timeout=min(args.device_timeout, 30.0), build_dir=args.build_dir)
    for note in found.notes:
        _say(f"warning: {note}")
    several = len(found.targets) > 1
    results = []
    if any(t.device.kind == "host" for t in found.targets):
        results += run_host(replace(opts, output_dir=output_dir_for(opts.output_dir, "host", several)))
    boards = [t for t in found.targets if t.device.kind != "host"]
    if not boards:
        return results, []
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    models_of(config, opts.models)   # an unknown name is an error before any device is touched
    device_results, errors = run_on_targets(config, boards, opts, notify=_say, several=several)
    for name, info in {r.device: r.device_info for r in device_results}.items():
        console.print(f"Device {escape(describe(name, info))}")
    return results + device_results, errors


def describe(name: str, info: dict) -> str:
    """board (ssh u@h:22, ABI arm64): Python 3.11.2, numpy 1.26.4, no numba, aarch64, Cortex-A72 x4, SoC rk3399"""
    soc = f", SoC {info['soc']}" if info.get("soc") else ""
    numba = (f", numba {info['numba']}" if info.get("numba") else ", no numba") if "numba" in info else ""
    cpu = f", {info['cpu']}" if info.get("cpu") else ""
    cpu += f" x{info['cores']}" if info.get("cores") else ""
    return (f"{name} ({info['address']}, ABI {info['abi']}): Python {info['python']}, "
            f"numpy {info['numpy']}{numba}, {info['machine']}{cpu}{soc}")


def raise_errors(errors: list) -> None:
    """One device: its error as is; several: one line each."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise MaceError(f"{len(errors)} devices failed:\n  " + "\n  ".join(map(str, errors)))
