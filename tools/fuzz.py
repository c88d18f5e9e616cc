#!/usr/bin/env python3
"""Long fuzz run: `python tools/fuzz.py --minutes 30 [--target onnx ...] [--out fuzz-findings]`.

Mutates the seeds in tests/fuzz/corpus/ (tests/fuzz/targets.py) round-robin over the
targets until the time is up, with a progress bar per target; every input whose loader
raised something other than a MaceError is a finding, bucketed by exception type and
place, the first input of each bucket saved under --out to reproduce with
`python tools/fuzz.py --replay FILE --target NAME`. Exits 1 when anything was found. A crash
of the process itself (a segfault, an abort on heap corruption) ends the run: the input it was
running is --out/last-input, its target on the first line.
docs/reliability.md, "Fuzzing".
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.fuzz.targets import TARGETS, mutate, run_one, seed, signature  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0, help="how long to run, all targets together")
    p.add_argument("--target", action="append", choices=sorted(TARGETS), default=None,
                   help="only this target (repeatable; default: all)")
    p.add_argument("--seed", type=int, default=0, help="random seed (runs are reproducible per seed)")
    p.add_argument("--out", default="fuzz-findings", help="folder for the inputs of findings")
    p.add_argument("--replay", default=None, metavar="FILE", help="run one saved input and show the error")
    return p.parse_args(argv)


def replay(path: Path, target: str) -> int:
    err = run_one(target, path.read_bytes())
    if err is None:
        print(f"{path}: accepted or a clear error (no finding)")
        return 0
    raise err


def fuzz(targets: list, minutes: float, rng: random.Random, out: Path, console: Console) -> dict:
    findings = {}   # signature -> [count, target, saved file, message]
    seeds = {t: seed(t) for t in targets}
    runs = {t: 0 for t in targets}
    end = time.monotonic() + minutes * 60
    out.mkdir(parents=True, exist_ok=True)
    last = out / "last-input"   # '<target>\n<input>'; removed when the run ends without dying
    columns = (TextColumn("{task.description:<12}"), BarColumn(), TextColumn("{task.fields[runs]} inputs"),
               TextColumn("{task.fields[found]} finding(s)"), TimeRemainingColumn())
    with Progress(*columns, console=console) as progress:
        tasks = {t: progress.add_task(t, total=minutes * 60, runs=0, found=0) for t in targets}
        while time.monotonic() < end:
            for t in targets:
                data = mutate(seeds[t], rng, rng.randint(1, 6))
                last.write_bytes(t.encode() + b"\n" + data)   # what a crash (a signal, an abort) was running
                err = run_one(t, data)
                runs[t] += 1
                if err is not None:
                    sig = f"{t}: {signature(err)}"
                    if sig not in findings:
                        out.mkdir(parents=True, exist_ok=True)
                        saved = out / f"{t}-{len(findings):03d}{Path(TARGETS[t][0]).suffix}"
                        saved.write_bytes(data)
                        findings[sig] = [0, t, saved, f"{type(err).__name__}: {err}"[:200]]
                        progress.console.print(f"[red]new finding[/] {sig} -> {saved}")
                    findings[sig][0] += 1
                elapsed = minutes * 60 - max(0.0, end - time.monotonic())
                progress.update(tasks[t], completed=elapsed, runs=runs[t],
                                found=sum(1 for f in findings.values() if f[1] == t))
    last.unlink(missing_ok=True)
    return {"runs": runs, "findings": findings}


def main(argv=None) -> int:
    args = parse_args(argv)
    console = Console()
    if args.replay:
        if not args.target or len(args.target) != 1:
            console.print("--replay needs one --target")
            return 2
        return replay(Path(args.replay), args.target[0])
    targets = args.target or sorted(TARGETS)
    result = fuzz(targets, args.minutes, random.Random(args.seed), Path(args.out), console)
    table = Table(title=f"fuzzed {sum(result['runs'].values())} inputs in {args.minutes:g} min")
    for col in ("finding", "count", "input", "message"):
        table.add_column(col)
    for sig, (count, _, saved, message) in sorted(result["findings"].items()):
        table.add_row(sig, str(count), str(saved), message)
    console.print(table)
    console.print(", ".join(f"{t}: {n} inputs" for t, n in result["runs"].items()))
    console.print(f"{len(result['findings'])} finding(s)" + (f", inputs in {args.out}/" if result["findings"] else ""))
    return 1 if result["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
