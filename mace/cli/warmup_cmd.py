"""`warmup`: compile the fast CPU kernels for this machine once, ahead of any model.

numba compiles each kernel the first time a model calls it with a new signature (1-4 s each)
and caches the machine code; without this, a model's first run pays for the kernels it is the
first to use. The signatures compiled here are those the corpus and the examples call
(mace/ops/fast/kernel_signatures.txt), so a model never seen before finds them cached.

`--aot` then compiles the serial ones once more into one library (mace/ops/fast/aot_build.py),
which one-thread runs with MACE_AOT=1 load without numba in the process: a small model's run then
peaks near 50 MB instead of ~170 (docs/memory.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn

from mace.errors import ConfigError
from mace.ops.fast import aot_build, kernel_cache

HELP = "compile the fast CPU kernels for this machine once (a first run then compiles nothing)"
NO_CONFIG = True


def add_arguments(p) -> None:
    p.add_argument("--kernels", default="all", choices=("all", "float", "int8"),
                   help="which kernels: all, the float ones, or the int8 ones")
    p.add_argument("--signatures", type=Path, default=None, metavar="FILE",
                   help="the kernel signatures to compile (default: the list shipped with the package, what "
                        "the corpus and the examples call; tools/gen_kernel_signatures.py writes such a file "
                        "for other models)")
    p.add_argument("--aot", action="store_true",
                   help="also compile them ahead of time into one library for this machine (a C compiler is "
                        "needed); one-thread runs with MACE_AOT=1 then load it without numba: a fraction of "
                        "the memory (docs/memory.md)")


def _wanted(rows: list, kernels: str) -> list:
    if kernels == "all":
        return rows
    int8 = [r for r in rows if r[0].startswith("mace.ops.fast.int8.")]
    return int8 if kernels == "int8" else [r for r in rows if r not in int8]


def main(args) -> int:
    console = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    if not kernel_cache.modules():
        console.print("note: numba is not available here (not installed, or MACE_NO_JIT=1): the numpy "
                      "kernels run and there is nothing to compile", markup=False)
        return 0
    path = args.signatures or kernel_cache.SIGNATURES_FILE
    if not path.is_file():
        raise ConfigError(f"--signatures {path}: no such file")
    rows = _wanted(kernel_cache.recorded(path), args.kernels)
    if not rows:
        raise ConfigError(f"{path}: lists no kernel signatures" + ("" if args.signatures else
                                                                   " (the package is damaged: reinstall it)"))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=console, transient=True) as progress:
        task = progress.add_task("warmup", total=len(rows))

        def step(name: str) -> None:
            progress.update(task, description=name.rpartition(":")[2], advance=0 if step.first else 1)
            step.first = False
        step.first = True
        done = kernel_cache.warm(rows, on_step=step)
    print(f"warmup: {done.total} kernel signatures for this machine: {done.compiled} compiled now, "
          f"{done.cached} already compiled or cached, {done.stale} stale, in {done.seconds:.1f} s; cache in {done.cache_dir}")
    if done.stale:
        print(f"note: {done.stale} listed signature(s) no longer match their kernels; they compile on first "
              f"use instead", file=sys.stderr)
    if done.compiled + done.cached == 0:
        print("error: warmup compiled nothing", file=sys.stderr)
        return 1
    return _ahead(rows, console) if args.aot else 0


RUN_HINT = "MACE_AOT=1 python tools/converter.py run --config <your deployment.yml> --omp_num_threads 1"


def _ahead(rows: list, console) -> int:
    """Compile `rows`' serial signatures into this machine's library (a spinner for the one long
    compile: numba gives no progress inside it)."""
    with console.status("compiling kernels ahead of time ...") as status:
        def step(name: str) -> None:
            step.done += 1
            status.update(f"compiling kernels ahead of time: {step.done} of about {len(rows)}, "
                          f"{name.rpartition(':')[2]}")
        step.done = 0

        def linking(n: int) -> None:
            status.update(f"compiling {n} kernel signatures into one library (about {max(5, n // 3)} s) ...")
        try:
            built = aot_build.build(rows, on_step=step, on_compile=linking)
        except Exception as e:   # no C compiler, no Python headers: nothing is left behind
            print(f"error: warmup --aot: the library could not be built ({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
                  "numba's ahead-of-time compiler needs a C compiler (gcc) and Python's C headers "
                  "(Debian: python3-dev)", file=sys.stderr)
            return 1
    left = ", ".join(f"{n} {why}" for why, n in sorted(built.skipped.items()))
    if not built.exported:
        print(f"error: warmup --aot: none of the {len(rows)} signatures can be compiled ahead of time"
              + (f" ({left})" if left else ""), file=sys.stderr)
        return 1
    print(f"warmup --aot: {built.exported} kernel signatures compiled ahead of time into {built.path} "
          f"({built.size_mb:.1f} MB) in {built.seconds:.1f} s"
          + (f"; left to numba at run time: {left}" if left else ""))
    print(f"runs of one thread load it with MACE_AOT=1 and import no numba, e.g. `{RUN_HINT}`")
    return 0
